package loop_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// benchRun runs b.N complete fresh runs of calls tool-call turns (one `add`
// call each) followed by a text turn. The scripted provider is sequential
// and records nothing, so its own cost stays O(1) per call; the provider is
// rebuilt per iteration.
func benchRun(b *testing.B, calls int, opts func(i int) []loop.RunOption) {
	steps := make([]scripted.Step, 0, calls+1)
	for i := 0; i < calls; i++ {
		steps = append(steps, scripted.CallTool("add", map[string]int{"a": i, "b": 1}, fmt.Sprintf("c%d", i)))
	}
	steps = append(steps, scripted.Text("done"))
	runner := loop.NewRunner(loop.RunnerConfig{})
	add := addTool()
	input := []loop.Entry{loop.UserText("add things")}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := scripted.New(steps, scripted.Sequential(), scripted.NoRecording())
		a := &loop.Agent{Name: "bench", Provider: p, Tools: []*loop.Tool{add}}
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
