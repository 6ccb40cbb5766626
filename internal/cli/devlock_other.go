//go:build !unix

package cli

// lockDevData does not lock where flock is missing: run one lovia dev per
// data directory.
func lockDevData(string) (func(), error) { return func() {}, nil }
