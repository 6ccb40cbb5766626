package watchdog

import "errors"

// Causes attached to the call's context when the watchdog ends it.
var (
	// ErrCallTimeout is the cause when the whole call exceeded its deadline.
	ErrCallTimeout = errors.New("call timeout")
	// ErrIdleTimeout is the cause when no stream event arrived in time.
	ErrIdleTimeout = errors.New("stream idle timeout")
)
