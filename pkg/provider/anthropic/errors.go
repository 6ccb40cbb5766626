package anthropic

import (
	"context"
	"errors"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/classify"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
)

// Sentinels in the Cause chain of the errors Stream returns. Every failed
// call returns a *loop.ProviderError (Retryable and RetryAfter set) or a
// *loop.ContextOverflowError; match these with errors.Is for the reason.
var (
	// ErrMissingAPIKey: the official host was called without a key.
	ErrMissingAPIKey = classify.ErrMissingAPIKey
	// ErrStreamTruncated: the stream ended before "message_stop" (retryable).
	ErrStreamTruncated = classify.ErrStreamTruncated
	// ErrStreamError: the API sent an "error" event mid-stream.
	ErrStreamError = classify.ErrStreamError
	// ErrIdleTimeout: no stream event arrived within IdleTimeout (retryable).
	ErrIdleTimeout = watchdog.ErrIdleTimeout
	// ErrCallTimeout: the call exceeded Timeout (retryable).
	ErrCallTimeout = watchdog.ErrCallTimeout
)

// retryableTypes are the error types of the API that a later attempt may
// not meet; see the API's error reference.
var retryableTypes = map[string]bool{
	"overloaded_error": true,
	"rate_limit_error": true,
	"api_error":        true,
	"timeout_error":    true,
}

// failure translates the error that ended a stream (or its request). started
// reports whether any event had arrived.
func (p *Provider) failure(parent context.Context, call *watchdog.Call, resp *http.Response, started bool, err error) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	if cause := call.Cause(); cause != nil {
		limit := call.Idle()
		if errors.Is(cause, watchdog.ErrCallTimeout) {
			limit = call.Timeout()
		}
		return p.ep.Timeout("the messages stream", limit, cause)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode >= 400 {
			a := classify.APIError{Status: apiErr.StatusCode, Body: []byte(apiErr.RawJSON()), Message: apiErr.Message, Type: string(apiErr.Type())}
			if apiErr.Response != nil {
				a.Header = apiErr.Response.Header
			}
			return p.ep.HTTP(a, err)
		}
		// An "error" event inside a 200 stream.
		retry := loop.NotRetryable
		if retryableTypes[string(apiErr.Type())] || apiErr.Type() == "" {
			retry = loop.Retryable
		}
		return p.ep.StreamError(apiErr.Message, string(apiErr.Type()), retry, err)
	}
	if !started && resp != nil && resp.StatusCode >= 400 {
		return p.ep.HTTP(classify.APIError{Status: resp.StatusCode, Header: resp.Header}, err)
	}
	if !started {
		return p.ep.Transport(err)
	}
	return p.ep.Truncated(err)
}
