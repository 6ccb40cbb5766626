package classify

import "errors"

// Sentinels carried in the Cause chain of the errors this package builds.
var (
	// ErrMissingAPIKey: the endpoint needs a key and none was configured.
	ErrMissingAPIKey = errors.New("no API key configured")
	// ErrStreamTruncated: the stream ended without its finish marker.
	ErrStreamTruncated = errors.New("stream ended without a finish marker")
	// ErrStreamError: the endpoint sent an error event inside the stream.
	ErrStreamError = errors.New("error event in the stream")
)
