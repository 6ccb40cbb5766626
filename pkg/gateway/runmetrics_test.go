package gateway_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunMetrics: the gateway exports the fleet's runs by status and the
// runs awaiting a decision from its run index — a gated run counts as
// awaiting from its approval request until the decision, then completed.
func TestRunMetrics(t *testing.T) {
	b := setup(t)
	value := func(series string) (float64, bool) {
		t.Helper()
		resp, data := b.do(t, http.MethodGet, "/metrics", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		m := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(data)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(t, err)
		return v, true
	}
	waitValue := func(series string, want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, ok := value(series)
			if ok && v == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waited 30s for %s to be %v: last %v (exported: %v)", series, want, v, ok)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	runID := b.submit(t, `{"agent": "gated", "input": "go"}`)
	waitValue("lovia_runs_awaiting_decision", 1)
	resp, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/approvals/c1", `{"decision": "approve"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	waitValue(`lovia_runs_indexed{status="completed"}`, 1)
	waitValue("lovia_runs_awaiting_decision", 0)
}
