package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TypeMaxDeliveries is the error type of a run that was claimed the
// consumer's MaxDeliver times without finishing.
const TypeMaxDeliveries = "MaxDeliveriesExceeded"

// Dead letters. When a run request reaches the consumer's MaxDeliver (its
// workers kept dying or releasing it), the server stops delivering it but
// leaves it in the work queue, and says so in an advisory, which the
// dead-letter stream keeps. One worker of the fleet ends such a run for good: run_failed with
// MaxDeliveriesExceeded (unless a terminal event is already out), the index
// marked failed, the request deleted — so the run is never stuck "running".

type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// startDeadLetters binds the dead-letter stream (which keeps the
// advisories even while no worker runs) through the shared durable
// consumer, and starts the loop that handles them.
func (w *Worker) startDeadLetters(ctx context.Context) error {
	runs, err := w.js.Stream(ctx, w.names.RunsStream())
	if err != nil {
		return err
	}
	w.runsStream = runs
	cons, err := w.js.CreateOrUpdateConsumer(ctx, w.names.DeadLetterStream(), jetstream.ConsumerConfig{
		Durable:     w.names.DeadLetterConsumer(),
		Description: "Lovia workers: fail runs that reached max deliveries",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     10 * time.Second,
		MaxDeliver:  5,
	})
	if err != nil {
		return fmt.Errorf("dead-letter consumer on %s: %w (provision the streams first)", w.names.DeadLetterStream(), err)
	}
	w.deadCtx, w.stopDead = context.WithCancel(context.Background())
	w.deadDone = make(chan struct{})
	go w.deadLetterLoop(cons)
	return nil
}

func (w *Worker) deadLetterLoop(cons jetstream.Consumer) {
	defer close(w.deadDone)
	for w.deadCtx.Err() == nil {
		fctx, cancel := context.WithTimeout(w.deadCtx, 5*time.Second)
		batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			select {
			case <-w.deadCtx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for m := range batch.Messages() {
			if w.deadCtx.Err() != nil {
				_ = m.Nak() // stopping: hand it to another worker at once
				continue
			}
			w.onMaxDeliveries(m.Data())
			_ = m.Ack()
		}
		cancel()
	}
}

func (w *Worker) onMaxDeliveries(data []byte) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &adv); err != nil || adv.StreamSeq == 0 {
		w.log.Warn("dead letter: unreadable max-deliveries advisory", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	raw, err := w.runsStream.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		w.log.Warn("dead letter: request not found", "stream_seq", adv.StreamSeq, "error", err)
		return
	}
	req, enc, derr := bus.DecodeRunRequest(raw.Header, raw.Data)
	if derr != nil {
		req, enc = &bus.RunRequest{}, bus.JSON
	}
	if req.Encoding != "" {
		enc = req.Encoding
	}
	runID, err := bus.RawSubmitRunID(req, raw.Header, adv.StreamSeq)
	if err == nil {
		agent, _ := w.names.ParseSubmit(raw.Subject)
		w.failDeadLetter(ctx, runID, agent, enc, adv.Deliveries, adv.StreamSeq, raw.Time)
	}
	if err := w.runsStream.DeleteMsg(ctx, adv.StreamSeq); err != nil {
		w.log.Warn("dead letter: deleting the request failed", "stream_seq", adv.StreamSeq, "error", err)
	}
}

// failDeadLetter fails the run of agent's request at streamSeq (stored
// at submitted), unless that submission's terminal event is out already.
func (w *Worker) failDeadLetter(ctx context.Context, runID, agent string, enc bus.Encoding, deliveries, streamSeq uint64, submitted time.Time) {
	info := loop.ErrorInfo{
		Type:    TypeMaxDeliveries,
		Message: fmt.Sprintf("run %s was claimed %d times without finishing: the workers running it died or released it every time", runID, deliveries),
		Hint:    "look for this run id in the worker logs (a tool that crashes the process?); after fixing the cause, resubmit it with if_run_exists resume",
	}
	// A terminal event of another request is an earlier submission's.
	if last, err := w.lastEvent(ctx, runID); err == nil && (last == nil || !last.IsTerminal() || !ofRequest(last, streamSeq, submitted)) {
		if rp, err := w.pub.Open(ctx, runID, enc); err == nil {
			rp.SetRequest(streamSeq)
			_, _ = rp.Publish(ctx, runFailed(agent, info))
			if err := rp.Close(ctx); err != nil {
				w.log.Warn("dead letter: publishing run_failed failed", "run_id", runID, "error", err)
			}
		}
	}
	_, _ = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Finish(r, &loop.RunFailed{Error: info}, w.cfg.Clock())
	}))
	w.m.failed.WithLabelValues("", TypeMaxDeliveries).Inc()
	w.log.Warn("dead letter: run failed after max deliveries", "run_id", runID, "deliveries", deliveries)
}
