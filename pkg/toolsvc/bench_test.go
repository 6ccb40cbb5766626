package toolsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// BenchmarkToolCall compares one call of the same tool in process and
// through a tool service on an embedded NATS server (over loopback TCP),
// with and without the call-id dedupe; p50-µs is the median call.
func BenchmarkToolCall(b *testing.B) {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	add := counterTools(new(atomic.Int64), nil)[0]
	args := json.RawMessage(`{"a":2,"b":40}`)
	ctx := context.Background()

	run := func(b *testing.B, tl *loop.Tool) {
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			if _, err := tl.Func(ctx, nil, args); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
	}
	b.Run("in-process", func(b *testing.B) { run(b, add) })
	for _, dedupe := range []bool{false, true} {
		name := "service"
		cfg := toolsvc.Config{Conn: nc, Name: "bench", Tools: []*loop.Tool{add}}
		var n atomic.Int64
		callOf := func(context.Context, *loop.RunContext) toolsvc.Call { return toolsvc.Call{} }
		if dedupe {
			name, cfg.Name, cfg.Dedupe = "service-dedupe", "benchd", &toolsvc.Dedupe{}
			callOf = func(context.Context, *loop.RunContext) toolsvc.Call {
				return toolsvc.Call{RunID: "bench", CallID: fmt.Sprintf("c%d", n.Add(1))}
			}
		}
		b.Run(name, func(b *testing.B) {
			s, err := toolsvc.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer s.Stop(ctx)
			subject, _ := toolsvc.Subject("lovia", cfg.Name, "add")
			tl, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc, CallOf: callOf}, toolsvc.ToolInfo{Name: cfg.Name + "__add", Service: cfg.Name, Tool: "add", Subject: subject})
			if err != nil {
				b.Fatal(err)
			}
			run(b, tl)
		})
	}
}
