package classify

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// maxBody bounds the response body kept on a ProviderError.
const maxBody = 4 << 10

// Endpoint describes where a call went, for messages and hints.
type Endpoint struct {
	// Vendor is the adapter name ("openai", "anthropic").
	Vendor string
	// Model is the model the call asked for.
	Model string
	// BaseURL is the API root the call went to.
	BaseURL string
	// KeyEnv and BaseURLEnv name the environment variables a user sets to
	// fix credentials and addresses ("OPENAI_API_KEY", "OPENAI_BASE_URL").
	KeyEnv     string
	BaseURLEnv string
	// HasKey reports whether a key was sent.
	HasKey bool
	// Now is the clock for Retry-After dates (nil: time.Now).
	Now func() time.Time
}

// APIError is what an HTTP error response said.
type APIError struct {
	Status int
	Header http.Header
	Body   []byte
	// Message, Type and Code come from the body (see ParseBody) or from the
	// SDK's decoded error.
	Message string
	Type    string
	Code    string
}

// HTTP classifies an error response: 408, 429 and 5xx are retryable (with
// the endpoint's Retry-After), a rejected prompt that is too long becomes a
// *loop.ContextOverflowError, everything else is not retried and carries a
// hint. An "x-should-retry" header overrides the status.
func (ep Endpoint) HTTP(a APIError, cause error) error {
	if a.Message == "" && a.Type == "" && a.Code == "" {
		a.Message, a.Type, a.Code = ParseBody(a.Body)
	}
	if IsOverflow(a.Status, a.Message, a.Type, a.Code) {
		return ep.Overflow(a.Message, ContextWindow(a.Message, a.Body), cause)
	}
	pe := &loop.ProviderError{
		Message:    ep.httpMessage(a),
		Vendor:     ep.Vendor,
		Model:      ep.Model,
		StatusCode: a.Status,
		Retryable:  loop.NotRetryable,
		Body:       truncate(string(a.Body), maxBody),
		Cause:      cause,
	}
	switch {
	case a.Status == http.StatusTooManyRequests && isQuota(a.Type, a.Code, a.Message):
		pe.Hint = "the account is out of quota or credit: check the plan and billing of the key in " + ep.KeyEnv
	case a.Status == http.StatusRequestTimeout, a.Status == http.StatusTooManyRequests, a.Status >= 500:
		pe.Retryable = loop.Retryable
		pe.RetryAfter = RetryAfter(a.Header, ep.now())
		pe.Hint = "a transient failure of the endpoint: the loop's retry policy retries it"
	case a.Status == http.StatusUnauthorized:
		pe.Hint = ep.authHint()
	case a.Status == http.StatusForbidden:
		pe.Hint = fmt.Sprintf("the key in %s is not allowed to use model %q on %s: check the key's permissions, project or region", ep.KeyEnv, ep.Model, ep.BaseURL)
	case a.Status == http.StatusNotFound:
		pe.Hint = fmt.Sprintf("check the model name %q and the base URL %s (set %s; OpenAI-compatible servers usually serve under /v1, e.g. http://localhost:11434/v1)", ep.Model, ep.BaseURL, ep.BaseURLEnv)
	case a.Status == http.StatusPaymentRequired:
		pe.Hint = "the account cannot be billed: check the plan and billing of the key in " + ep.KeyEnv
	default:
		pe.Hint = "the endpoint rejected the request: fix the request, the tools' schemas or the model settings it names"
	}
	switch h := a.Header.Get("x-should-retry"); h {
	case "true":
		pe.Retryable = loop.Retryable
	case "false":
		pe.Retryable = loop.NotRetryable
	}
	return pe
}

func (ep Endpoint) httpMessage(a APIError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", ep.Vendor, a.Status)
	if t := http.StatusText(a.Status); t != "" {
		b.WriteString(" " + t)
	}
	fmt.Fprintf(&b, " from %s (model %q)", ep.BaseURL, ep.Model)
	if a.Message != "" {
		b.WriteString(": " + truncate(a.Message, 500))
	} else if len(a.Body) > 0 {
		b.WriteString(": " + truncate(strings.TrimSpace(string(a.Body)), 500))
	}
	return b.String()
}

func (ep Endpoint) authHint() string {
	if !ep.HasKey {
		return fmt.Sprintf("the endpoint %s requires an API key: set %s (or the adapter's APIKey); if you meant another server, set %s", ep.BaseURL, ep.KeyEnv, ep.BaseURLEnv)
	}
	return fmt.Sprintf("the endpoint %s rejected the API key: check that %s holds a valid key for it, or set %s if the key belongs to another server", ep.BaseURL, ep.KeyEnv, ep.BaseURLEnv)
}

// Overflow builds the error for a prompt the endpoint rejected as too long.
func (ep Endpoint) Overflow(msg string, window int, cause error) error {
	m := fmt.Sprintf("%s: the prompt exceeds the context window of model %q", ep.Vendor, ep.Model)
	if window > 0 {
		m += fmt.Sprintf(" (%d tokens)", window)
	}
	if msg != "" {
		m += ": " + truncate(msg, 500)
	}
	return &loop.ContextOverflowError{
		Message:        m,
		Hint:           "shorten the input or let the context policy compact the view; the window the endpoint named is remembered",
		ReportedWindow: window,
		Cause:          cause,
	}
}

// MissingKey is the error of a call to an endpoint that needs a key when
// none is configured. It is not retried.
func (ep Endpoint) MissingKey() error {
	return &loop.ProviderError{
		Message:   fmt.Sprintf("%s: no API key for %s", ep.Vendor, ep.BaseURL),
		Hint:      fmt.Sprintf("set %s (or the adapter's APIKey); for a keyless local server set %s to its address", ep.KeyEnv, ep.BaseURLEnv),
		Vendor:    ep.Vendor,
		Model:     ep.Model,
		Retryable: loop.NotRetryable,
		Cause:     ErrMissingAPIKey,
	}
}

// Truncated is the retryable error of a stream that ended before its
// finish marker; cause is the read error, if any.
func (ep Endpoint) Truncated(cause error) error {
	m := fmt.Sprintf("%s: the stream from %s ended before it finished", ep.Vendor, ep.BaseURL)
	if cause != nil {
		m += ": " + cause.Error()
	}
	c := ErrStreamTruncated
	if cause != nil {
		c = fmt.Errorf("%w: %w", ErrStreamTruncated, cause)
	}
	return &loop.ProviderError{
		Message:   m,
		Hint:      "the connection was cut mid-answer: the loop retries the turn (check proxies that buffer or time out long responses)",
		Vendor:    ep.Vendor,
		Model:     ep.Model,
		Retryable: loop.Retryable,
		Cause:     c,
	}
}

// StreamError is the error of an error event inside a stream.
func (ep Endpoint) StreamError(msg, typ string, retry loop.Retryability, cause error) error {
	if IsOverflow(http.StatusBadRequest, msg, typ, "") {
		return ep.Overflow(msg, ContextWindow(msg, nil), fmt.Errorf("%w: %w", ErrStreamError, cause))
	}
	m := fmt.Sprintf("%s: the endpoint reported an error mid-stream", ep.Vendor)
	if typ != "" {
		m += " (" + typ + ")"
	}
	if msg != "" {
		m += ": " + truncate(msg, 500)
	}
	hint := "the endpoint failed while answering: the loop retries the turn"
	if retry == loop.NotRetryable {
		hint = "the endpoint rejected the request while answering: fix what it names"
	}
	return &loop.ProviderError{
		Message:   m,
		Hint:      hint,
		Vendor:    ep.Vendor,
		Model:     ep.Model,
		Retryable: retry,
		Cause:     fmt.Errorf("%w: %w", ErrStreamError, cause),
	}
}

func (ep Endpoint) now() time.Time {
	if ep.Now != nil {
		return ep.Now()
	}
	return time.Now()
}

func isQuota(typ, code, msg string) bool {
	return typ == "insufficient_quota" || code == "insufficient_quota" ||
		strings.Contains(strings.ToLower(msg), "exceeded your current quota")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
