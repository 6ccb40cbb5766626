package loop_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// benchRun runs b.N complete fresh runs of calls tool-call turns (one `add`
// call each) followed by a text turn, with one agent (agents are
// configuration, reused across runs) and a stateless mock model whose own
// cost is O(1) per call.
func benchRun(b *testing.B, calls int, opts func(i int) []loop.RunOption) {
	runner := loop.NewRunner(loop.RunnerConfig{})
	a := &loop.Agent{Name: "bench", Provider: newBenchModel(calls), Tools: []*loop.Tool{addTool()}}
	input := []loop.Entry{loop.UserText("add things")}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var o []loop.RunOption
		if opts != nil {
			o = opts(i)
		}
		res, err := runner.Run(ctx, a, input, o...)
		if err != nil {
			b.Fatal(err)
		}
		if res.Turns != calls+1 {
			b.Fatalf("turns = %d", res.Turns)
		}
	}
	b.StopTimer()
	turns := float64(calls + 1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/turns, "ns/turn")
}

// BenchmarkRun: 2 turns (one add call, then text), no persistence.
func BenchmarkRun(b *testing.B) { benchRun(b, 1, nil) }

// BenchmarkRun20: 19 tool-call turns, then text.
func BenchmarkRun20(b *testing.B) { benchRun(b, 19, nil) }

// BenchmarkRunCheckpointed: BenchmarkRun with the in-memory checkpointer.
func BenchmarkRunCheckpointed(b *testing.B) {
	cp := loop.NewMemoryCheckpointer()
	benchRun(b, 1, func(i int) []loop.RunOption {
		return []loop.RunOption{loop.WithCheckpoint(cp, fmt.Sprintf("run-%d", i)), loop.WithDeleteOnSuccess()}
	})
}

// benchModel is a stateless scripted model: it answers turn k (known from
// the last entry of the view, O(1)) with call c<k> of add, and with text
// after `calls` calls. Its deltas are built once.
type benchModel struct {
	calls  int
	steps  [][]loop.Delta
	callID map[string]int
}

func newBenchModel(calls int) *benchModel {
	m := &benchModel{calls: calls, callID: map[string]int{}}
	usage := loop.Delta{Kind: loop.DeltaUsage, Usage: loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}}
	for i := 0; i < calls; i++ {
		id := fmt.Sprintf("c%d", i)
		m.callID[id] = i
		m.steps = append(m.steps, []loop.Delta{
			{Kind: loop.DeltaToolCall, CallID: id, Name: "add", Arguments: fmt.Sprintf(`{"a":%d,"b":1}`, i)}, usage})
	}
	m.steps = append(m.steps, []loop.Delta{{Kind: loop.DeltaText, Text: "done"}, usage})
	return m
}

func (m *benchModel) Info() loop.ProviderInfo {
	return loop.ProviderInfo{Name: "bench", Model: "bench"}
}

func (m *benchModel) Stream(_ context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	step := 0
	if last := req.Entries[len(req.Entries)-1]; last.Kind == loop.KindToolResult {
		step = m.callID[last.CallID] + 1
	}
	for _, d := range m.steps[step] {
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}
