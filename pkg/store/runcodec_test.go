package store

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestRunRecordEncodingMatchesReflection: a run record encodes to the
// same bytes as the reflective encoder writes — a fresh submission, a
// claimed run, a completed and a failed one, a parked one, every field
// set, values at the edges of their encodings — and decodes back equal.
func TestRunRecordEncodingMatchesReflection(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 123456789).UTC()
	reason := "stop"
	empty := ""
	every := RunRecord{
		RunID: "r1", Agent: "a", SessionID: "s", ParentRunID: "p", Status: RunCompleted, Worker: "w1",
		Attempt: 3, Turns: 1 << 33, Result: map[string]any{"k": []any{int64(-1), 1.5, "x", nil, true}}, // one key a map: msgpack writes a map's keys in random order
		Usage:      &loop.Usage{InputTokens: 1, OutputTokens: 1 << 40, CacheReadTokens: -5, TotalTokens: 300},
		FinalAgent: "b", FinishReason: &reason, Submissions: 2, RequestSeq: 1 << 63, Quiet: true, Requeues: 127,
		Parked: &Parking{CallID: "c1", Deadline: at, Request: []byte(`{"x":1}`), ContentType: "application/json", Continues: 9, TimerRevision: 4, LastSeq: 12},
		Wakes:  128, Attempts: []Attempt{{N: 1, Kind: StepSubmit, At: at}, {N: 2, Kind: StepClaim, Attempt: 1, Worker: "w1", Version: "0123456789ab+b1", At: at.Add(time.Millisecond)},
			{N: 3, Kind: StepResume, Attempt: 2, Version: "ba9876543210", At: at.Add(time.Millisecond)}},
		AttemptsDropped: 65536, Registry: 255, Version: "0123456789ab+b1", Error: &loop.ErrorInfo{Type: "T", Message: "m", Hint: "h", Retryable: true},
		Metadata:    map[string]any{"l": []any{"a", int64(5), 0.5, map[string]any{"n": "v"}}},
		InputDigest: "0123456789abcdef",
		CreatedAt:   at, UpdatedAt: at.Add(time.Second), StartedAt: at.Add(2 * time.Second), FinishedAt: at.Add(3 * time.Second),
	}
	fresh := RunRecord{RunID: "r2", Agent: "calc", Status: RunQueued, Submissions: 1, Quiet: true,
		Attempts: []Attempt{{N: 1, Kind: StepSubmit, At: at}}, CreatedAt: at, UpdatedAt: at}
	claimed := fresh
	claimed.Status, claimed.Worker, claimed.Attempt, claimed.Quiet, claimed.RequestSeq, claimed.StartedAt = RunRunning, "w2", 1, false, 77, at
	claimed.Attempts = append(append([]Attempt(nil), fresh.Attempts...), Attempt{N: 2, Kind: StepClaim, Attempt: 1, Worker: "w2", At: at})
	completed := claimed
	completed.Status, completed.Result, completed.Turns, completed.Usage, completed.FinalAgent, completed.FinishedAt =
		RunCompleted, "The answer is 84.", 2, &loop.Usage{InputTokens: 4, OutputTokens: 4, TotalTokens: 8}, "calc", at
	failed := claimed
	failed.Status, failed.Error, failed.FinishReason = RunFailed, &loop.ErrorInfo{Type: "MaxTurnsExceeded", Message: "m"}, &empty
	for name, r := range map[string]RunRecord{
		"zero": {}, "fresh": fresh, "claimed": claimed, "completed": completed, "failed": failed, "every field": every,
		"zero times and empty slices":  {RunID: "r3", Agent: "a", Attempts: []Attempt{}, Metadata: map[string]any{}, Result: ""},
		"empty results":                {RunID: "r4", Agent: "a", Result: map[string]any{}},
		"zero result":                  {RunID: "r4", Agent: "a", Result: 0.0},
		"false result":                 {RunID: "r4", Agent: "a", Result: false},
		"a struct result":              {RunID: "r4", Agent: "a", Result: loop.Usage{}},
		"a struct result, set":         {RunID: "r4", Agent: "a", Result: loop.Usage{InputTokens: 1}},
		"a time result":                {RunID: "r4", Agent: "a", Result: time.Time{}},
		"a zero usage":                 {RunID: "r5", Agent: "a", Status: RunCompleted, Usage: &loop.Usage{}},
		"a usage of total tokens only": {RunID: "r5", Agent: "a", Usage: &loop.Usage{TotalTokens: 3}},
	} {
		got, err := marshal(&r)
		require.NoError(t, err, name)
		ref := plainRecord(r)
		want, err := marshal(&ref)
		require.NoError(t, err, name)
		require.Equal(t, want, got, "%s: the custom encoding differs from the reflective one", name)

		var back, wantBack RunRecord
		require.NoError(t, unmarshal(got[1:], &back), name)
		require.NoError(t, unmarshal(want[1:], &wantBack), name)
		require.Equal(t, wantBack, back, name)
	}
}

// TestRunRecordCodecKnowsEveryField fails when RunRecord or Attempt gains
// a field that EncodeMsgpack does not write (it would be dropped from the
// run index).
func TestRunRecordCodecKnowsEveryField(t *testing.T) {
	t.Parallel()
	tags := msgpackTags
	require.Equal(t, []string{"run_id", "agent", "session_id", "parent_run_id", "status", "worker", "attempt", "turns",
		"result", "usage", "final_agent", "finish_reason", "submissions", "request_seq", "quiet", "requeues", "parked",
		"wakes", "attempts", "attempts_dropped", "registry_revision", "version", "error", "metadata", "input_digest", "created_at", "updated_at",
		"started_at", "finished_at"}, tags(RunRecord{}),
		"RunRecord's fields changed: make its EncodeMsgpack (runcodec.go) write them, in declaration order")
	require.Equal(t, []string{"n", "kind", "attempt", "worker", "version", "at"}, tags(Attempt{}),
		"Attempt's fields changed: make RunRecord's EncodeMsgpack (runcodec.go) write them, in declaration order")
	require.Equal(t, []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"}, tags(loop.Usage{}),
		"loop.Usage's fields changed: make RunRecord's EncodeMsgpack (runcodec.go) write them, in declaration order")
}

// TestRunRecordEncodingAllocations: encoding a claimed run's record costs
// the buffer it is written into and little else (reflectively: about 25
// allocations, the omitempty checks boxing each field).
func TestRunRecordEncodingAllocations(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	r := RunRecord{RunID: "r1", Agent: "calc", Status: RunRunning, Worker: "w1", Attempt: 1, Submissions: 1, RequestSeq: 7,
		Attempts:  []Attempt{{N: 1, Kind: StepSubmit, At: at}, {N: 2, Kind: StepClaim, Attempt: 1, Worker: "w1", At: at}},
		CreatedAt: at, UpdatedAt: at, StartedAt: at}
	custom := testing.AllocsPerRun(100, func() { _, _ = marshal(&r) })
	ref := plainRecord(r)
	reflective := testing.AllocsPerRun(100, func() { _, _ = marshal(&ref) })
	t.Logf("allocations: %.0f (reflective %.0f)", custom, reflective)
	require.LessOrEqual(t, custom, 8.0, "the record codec allocates (reflective: %.0f)", reflective) // 4, and the encoder pool under -race
}

// msgpackTags lists the msgpack names of v's fields, in declaration
// order: the codec tests compare them with what the hand-written encoders
// write.
func msgpackTags(v any) []string {
	var out []string
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("msgpack"), ",")
		out = append(out, tag)
	}
	return out
}

// TestRunRecordVersionIsCompatible: a record stored before agent versions
// (no version keys) decodes with none, and one that has them decodes in a
// worker of the version before (its record type without them) with the
// rest intact: a rolling deploy's two kinds of workers share the index.
func TestRunRecordVersionIsCompatible(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0).UTC()
	type oldAttempt struct {
		N       int       `msgpack:"n"`
		Kind    string    `msgpack:"kind"`
		Attempt int       `msgpack:"attempt"`
		Worker  string    `msgpack:"worker,omitempty"`
		At      time.Time `msgpack:"at"`
	}
	type oldRecord struct {
		RunID    string       `msgpack:"run_id"`
		Agent    string       `msgpack:"agent"`
		Status   RunStatus    `msgpack:"status"`
		Attempt  int          `msgpack:"attempt"`
		Attempts []oldAttempt `msgpack:"attempts,omitempty"`
		Registry uint64       `msgpack:"registry_revision,omitempty"`
	}
	old := oldRecord{RunID: "r1", Agent: "a", Status: RunRunning, Attempt: 1, Registry: 3,
		Attempts: []oldAttempt{{N: 1, Kind: StepClaim, Attempt: 1, Worker: "w1", At: at}}}
	data, err := marshal(&old)
	require.NoError(t, err)
	var rec RunRecord
	require.NoError(t, unmarshal(data[1:], &rec))
	require.Equal(t, "", rec.Version)
	rec.Attempts[0].At = rec.Attempts[0].At.UTC()
	require.Equal(t, []Attempt{{N: 1, Kind: StepClaim, Attempt: 1, Worker: "w1", At: at}}, rec.Attempts)
	require.Equal(t, uint64(3), rec.Registry)

	rec.Version = "0123456789ab"
	rec.AddClaimStep(StepResume, "w2", "ba9876543210+b2", at)
	data, err = marshal(&rec)
	require.NoError(t, err)
	var back oldRecord
	require.NoError(t, unmarshal(data[1:], &back))
	require.Equal(t, uint64(3), back.Registry)
	require.Len(t, back.Attempts, 2)
	back.Attempts[1].At = back.Attempts[1].At.UTC()
	require.Equal(t, oldAttempt{N: 2, Kind: StepResume, Attempt: 1, Worker: "w2", At: at}, back.Attempts[1])
	var again RunRecord
	require.NoError(t, unmarshal(data[1:], &again))
	require.Equal(t, "0123456789ab", again.Version)
	require.Equal(t, "ba9876543210+b2", again.Attempts[1].Version)
}
