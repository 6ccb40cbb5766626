package classify

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseBody reads the message, type and code of an error body in the shapes
// endpoints use: {"error": {"message", "type", "code"}} (OpenAI, llama.cpp,
// Anthropic's {"type": "error", "error": {…}}), a top-level {"message",
// "type", "code"} (older vLLM), {"error": "text"} (Ollama) and
// {"detail": "text"} (FastAPI servers). Anything else yields empty strings.
func ParseBody(body []byte) (msg, typ, code string) {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &top) != nil {
		return "", "", ""
	}
	if len(top.Error) > 0 && top.Error[0] == '{' {
		var inner struct {
			Message json.RawMessage `json:"message"`
			Type    json.RawMessage `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(top.Error, &inner) == nil {
			return scalar(inner.Message), scalar(inner.Type), scalar(inner.Code)
		}
	}
	if s := scalar(top.Error); s != "" {
		return s, "", ""
	}
	msg, typ, code = scalar(top.Message), scalar(top.Type), scalar(top.Code)
	if typ == "error" {
		typ = ""
	}
	if msg == "" {
		msg = scalar(top.Detail)
	}
	return msg, typ, code
}

// scalar renders a JSON string or number as text; other values yield "".
func scalar(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// overflowPhrases mark an error message as a context-length rejection.
var overflowPhrases = []string{
	"context_length_exceeded",
	"context length",
	"maximum context",
	"context window",
	"context size",
	"context limit",
	"exceed_context_size",
	"prompt is too long",
	"prompt too long",
	"input tokens exceed",
	"maximum model length",
	"reduce the length of the messages",
	"too many input tokens",
}

// IsOverflow reports whether an error response rejects a prompt for being
// longer than the model's context window. Only client errors (400, 413,
// 422) count: a 429 that talks about tokens is a rate limit.
func IsOverflow(status int, msg, typ, code string) bool {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
	default:
		return false
	}
	if status == http.StatusRequestEntityTooLarge {
		return true
	}
	if code == "context_length_exceeded" || typ == "exceed_context_size_error" || typ == "request_too_large" {
		return true
	}
	m := strings.ToLower(msg)
	for _, p := range overflowPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// windowPatterns extract the window from the messages endpoints send, most
// specific first. The first group is the number.
var windowPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)maximum context length (?:is|of) ([\d,]+)`),
	regexp.MustCompile(`(?i)context length of only ([\d,]+)`),
	regexp.MustCompile(`(?i)maximum model length (?:is|of) ([\d,]+)`),
	regexp.MustCompile(`(?i)max_model_len\W{0,3}([\d,]+)`),
	regexp.MustCompile(`(?i)configured limit of ([\d,]+)`),
	regexp.MustCompile(`(?i)exceed context limit: [\d,]+ \+ [\d,]+ > ([\d,]+)`),
	regexp.MustCompile(`(?i)tokens? > ([\d,]+) maximum`),
	regexp.MustCompile(`(?i)available context size \(([\d,]+) tokens?\)`),
	regexp.MustCompile(`(?i)context (?:window|size|length|limit) (?:is |of )?([\d,]+)`),
	regexp.MustCompile(`"n_ctx"\s*:\s*(\d+)`),
}

// ContextWindow returns the context window an overflow message (or its
// body) names, or 0 when it names none.
func ContextWindow(msg string, body []byte) int {
	for _, text := range []string{msg, string(body)} {
		if text == "" {
			continue
		}
		for _, re := range windowPatterns {
			m := re.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// maxRetryAfter caps what an endpoint may ask the loop to wait.
const maxRetryAfter = 10 * time.Minute

// RetryAfter is the wait an error response asks for: "retry-after-ms"
// (milliseconds), else "Retry-After" as seconds or an HTTP date. It returns
// 0 when there is none or it cannot be read, and caps absurd values.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsNaN(ms) {
			if ms > float64(maxRetryAfter/time.Millisecond) {
				return maxRetryAfter
			}
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0
		}
		if s > maxRetryAfter.Seconds() {
			return maxRetryAfter
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return capWait(d)
		}
	}
	return 0
}

func capWait(d time.Duration) time.Duration {
	if d > maxRetryAfter || d < 0 {
		return maxRetryAfter
	}
	return d
}
