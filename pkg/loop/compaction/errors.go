package compaction

import "errors"

var (
	// ErrInvalidConfig is wrapped by [Config.Validate] errors, which name
	// the field.
	ErrInvalidConfig = errors.New("compaction: invalid config")
	// ErrSummaryRejected is wrapped by summarizer failures the Summarize
	// stage counts toward its circuit breaker: an empty answer, a
	// truncated one (finish reason "length") or one above the size limit.
	ErrSummaryRejected = errors.New("compaction: summary rejected")
)
