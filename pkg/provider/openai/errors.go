package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	oai "github.com/openai/openai-go/v3"

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
	// ErrStreamTruncated: the stream ended before "[DONE]" or a finish
	// reason (retryable).
	ErrStreamTruncated = classify.ErrStreamTruncated
	// ErrStreamError: the endpoint sent an error object mid-stream.
	ErrStreamError = classify.ErrStreamError
	// ErrIdleTimeout: no stream event arrived within IdleTimeout (retryable).
	ErrIdleTimeout = watchdog.ErrIdleTimeout
	// ErrCallTimeout: the call exceeded Timeout (retryable).
	ErrCallTimeout = watchdog.ErrCallTimeout
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// callError translates a failed request (no stream yet) into the loop's
// errors. resp is the response the SDK saw, if any.
func (p *Provider) callError(parent context.Context, call *watchdog.Call, op string, resp *http.Response, err error) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	if cause := call.Cause(); cause != nil {
		return p.timeoutError(op, call, cause)
	}
	var apiErr *oai.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		resp = apiErr.Response
	}
	if resp != nil && resp.StatusCode >= 400 {
		a := classify.APIError{Status: resp.StatusCode, Header: resp.Header, Body: readBody(resp)}
		a.Message, a.Type, a.Code = classify.ParseBody(a.Body)
		if apiErr != nil && a.Message == "" {
			a.Message, a.Type, a.Code = apiErr.Message, apiErr.Type, apiErr.Code
		}
		return p.ep.HTTP(a, err)
	}
	return p.ep.Transport(err)
}

// streamError translates a failure while reading the stream.
func (p *Provider) streamError(parent context.Context, call *watchdog.Call, err error) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	if cause := call.Cause(); cause != nil {
		return p.timeoutError("reading the chat completion stream", call, cause)
	}
	return p.ep.Truncated(err)
}

func (p *Provider) timeoutError(op string, call *watchdog.Call, cause error) error {
	limit := call.Idle()
	if errors.Is(cause, watchdog.ErrCallTimeout) {
		limit = call.Timeout()
	}
	return p.ep.Timeout(op, limit, cause)
}

// chunkError is the error of an {"error": …} object inside the stream.
func (p *Provider) chunkError(data []byte) error {
	msg, typ, code := classify.ParseBody(data)
	retry := loop.Retryable
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error":
		retry = loop.NotRetryable
	}
	if code == "context_length_exceeded" {
		return p.ep.Overflow(msg, classify.ContextWindow(msg, data), fmt.Errorf("%w: %s", ErrStreamError, data))
	}
	return p.ep.StreamError(msg, typ, retry, errors.New(string(data)))
}

func readBody(resp *http.Response) []byte {
	if resp == nil || resp.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	// Leave the body readable for whoever inspects the SDK error later.
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b
}
