// Command go-worker is an order-support agent defined in Go and served on
// a Lovia Fleet: its tools read an order store the program opens once and
// hands to every run (lovia.Config.Deps), an output guardrail checks the
// answer against the store, and the answer is a Go value (OrderAnswer).
//
//	go run ./examples/go-worker dev                       # an embedded fleet, or
//	go run ./examples/go-worker --nats nats://host:4222   # a worker of a fleet
//	go run ./examples/go-worker run --agent support "where is order A1?"
//
// The model is scripted (no API key needed): it looks the order up, asks
// for its shipment's tracking, then answers. Swap in Model:
// "openai:gpt-4.1-mini" for a real one.
//
// For tests, $ORDER_TOOL_LOG names a file each tool call start is
// appended to, and $ORDER_TRACK_GATE a file track_shipment waits for
// before it answers.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lovia-fleet/lovia"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// Order is one order of the store.
type Order struct {
	Status   string
	Tracking string
}

// Orders is the program's order store (a database in a real program).
type Orders map[string]Order

// OrderAnswer is the agent's typed output.
type OrderAnswer struct {
	Order  string `json:"order"`
	Status string `json:"status"`
	ETA    string `json:"eta"`
}

type orderID struct {
	Order string `json:"order" desc:"the order id, e.g. A1"`
}

func lookupOrder(_ context.Context, rc *loop.RunContext, in orderID) (string, error) {
	record("lookup_order")
	o, ok := rc.Deps.(Orders)[in.Order]
	if !ok {
		return "", &loop.ToolError{Message: "no order " + in.Order}
	}
	return o.Status + ", tracking " + o.Tracking, nil
}

func trackShipment(ctx context.Context, _ *loop.RunContext, in orderID) (string, error) {
	record("track_shipment")
	for gate := os.Getenv("ORDER_TRACK_GATE"); gate != ""; {
		if _, err := os.Stat(gate); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "arrives tomorrow", nil
}

// checkAnswer is the output guardrail: the answer names a known order
// with its true status.
func checkAnswer(_ context.Context, rc *loop.RunContext, out any) (string, error) {
	a := out.(OrderAnswer)
	o, ok := rc.Deps.(Orders)[a.Order]
	if !ok || o.Status != a.Status {
		return fmt.Sprintf("the answer's order %q or status %q does not match the store", a.Order, a.Status), nil
	}
	return "", nil
}

// record appends a tool call start to $ORDER_TOOL_LOG (pid and tool).
func record(tool string) {
	if p := os.Getenv("ORDER_TOOL_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d %s\n", os.Getpid(), tool)
			_ = f.Close()
		}
	}
}

func main() {
	orders := Orders{"A1": {Status: "shipped", Tracking: "ZX-1"}}
	model := scripted.New([]scripted.Step{
		scripted.CallTool("lookup_order", orderID{Order: "A1"}, "c1"),
		scripted.CallTool("track_shipment", orderID{Order: "A1"}, "c2"),
		scripted.Text(`{"order": "A1", "status": "shipped", "eta": "tomorrow"}`),
	}, scripted.ForAgent("support"))
	support := &loop.Agent{
		Name:             "support",
		Instructions:     "You answer customers about their orders. Look the order up before answering.",
		Provider:         model,
		Tools:            []*loop.Tool{loop.NewTool("lookup_order", "look an order up", lookupOrder), loop.NewTool("track_shipment", "track an order's shipment", trackShipment)},
		Output:           loop.OutputFor[OrderAnswer](),
		OutputGuardrails: []loop.OutputGuardrail{checkAnswer},
	}
	lovia.Main(lovia.Config{Agents: []*loop.Agent{support}, Deps: orders})
}
