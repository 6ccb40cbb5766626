package toolsvc

// CallKey and ArgsDigest let the tests write what an instance left in
// the dedupe bucket.
var (
	CallKey    = callKey
	ArgsDigest = argsDigest
)
