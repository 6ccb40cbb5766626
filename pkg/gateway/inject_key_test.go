package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// POST /v1/runs/{id}/messages with a key is idempotent: a repeat (a
// client retrying after a lost response) answers the first token and
// the run gets the message once; a key over the limit is refused with a
// message naming the field.
func TestInjectWithKeyIsAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, sse := b.stream(t, t.Context(), http.MethodPost, "/v1/runs", `{"agent": "napper", "input": "rest"}`)
	runID := resp.Header.Get("Lovia-Run-Id")
	sse.until(t, "tool_call_started")

	post := func(body string) (int, []byte) {
		resp, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/messages", body)
		return resp.StatusCode, data
	}
	var tokens []string
	for _, body := range []string{`{"content": "check the logs", "key": "retry-1"}`, `{"content": "check the logs (retried)", "key": "retry-1"}`} {
		code, data := post(body)
		require.Equal(t, http.StatusOK, code, string(data))
		var rep bus.InjectReply
		require.NoError(t, json.Unmarshal(data, &rep))
		tokens = append(tokens, rep.Token)
	}
	require.NotEmpty(t, tokens[0])
	require.Equal(t, tokens[0], tokens[1], "the repeat answers the first inject's token")

	code, data := post(`{"content": "x", "key": "` + strings.Repeat("k", bus.MaxInjectKeyLen+1) + `"}`)
	require.Equal(t, http.StatusBadRequest, code, string(data))
	_, msg, hint := apiError(t, data)
	require.Contains(t, msg, "key: is 257 bytes, over the 256-byte limit")
	require.NotEmpty(t, hint)

	var injected []string
	evs := sse.events()
	for _, ev := range evs {
		if ev.Event == "user_message_injected" {
			injected = append(injected, ev.envelope(t).Data["content"].(string))
		}
	}
	require.Equal(t, []string{"check the logs"}, injected)
	require.Equal(t, "run_completed", evs[len(evs)-1].Event)
}
