package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoredGoValueKeepsJSONNames: a run's output of a Go type (a code
// agent's loop.OutputFor[T]) is stored under its json names, as its
// run_completed event carries it on the wire: the run's status and a
// replay return {"result": 7}, not {"Result": 7}.
func TestStoredGoValueKeepsJSONNames(t *testing.T) {
	t.Parallel()
	type answer struct {
		Result int    `json:"result"`
		Note   string `json:"note,omitempty"`
	}
	at := time.Unix(1700000000, 0).UTC()
	rec := RunRecord{RunID: "r1", Agent: "a", Status: RunCompleted, Result: answer{Result: 7}, CreatedAt: at, UpdatedAt: at}
	b, err := marshal(&rec)
	require.NoError(t, err)
	var back RunRecord
	require.NoError(t, unmarshal(b[1:], &back))
	require.Equal(t, map[string]any{"result": int64(7)}, back.Result)
	require.Equal(t, rec.RunID, back.RunID, "fields with msgpack tags keep their names")
}
