package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TypeMaxDeliveries is the error type of a run that was claimed the
// consumer's MaxDeliver times without finishing.
const TypeMaxDeliveries = "MaxDeliveriesExceeded"

// Dead letters. When a run request reaches the consumer's MaxDeliver (its
// workers kept dying or releasing it), the server stops delivering it but
// leaves it in the work queue, and says so in an advisory. One worker of the
// fleet (a queue group) ends such a run for good: run_failed with
// MaxDeliveriesExceeded (unless a terminal event is already out), the index
// marked failed, the request deleted — so the run is never stuck "running".

type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func (w *Worker) deadLetterSubject() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + w.names.RunsStream() + "." + w.names.WorkersConsumer()
}

func (w *Worker) startDeadLetters(ctx context.Context) error {
	runs, err := w.js.Stream(ctx, w.names.RunsStream())
	if err != nil {
		return err
	}
	w.runsStream = runs
	sub, err := w.cfg.Conn.QueueSubscribe(w.deadLetterSubject(), w.names.Prefix()+"-deadletters", w.onMaxDeliveries)
	if err != nil {
		return err
	}
	w.deadSub = sub
	return nil
}

func (w *Worker) onMaxDeliveries(m *nats.Msg) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
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
		w.failDeadLetter(ctx, runID, enc, adv.Deliveries)
	}
	if err := w.runsStream.DeleteMsg(ctx, adv.StreamSeq); err != nil {
		w.log.Warn("dead letter: deleting the request failed", "stream_seq", adv.StreamSeq, "error", err)
	}
}

func (w *Worker) failDeadLetter(ctx context.Context, runID string, enc bus.Encoding, deliveries uint64) {
	info := loop.ErrorInfo{
		Type:    TypeMaxDeliveries,
		Message: fmt.Sprintf("run %s was claimed %d times without finishing: the workers running it died or released it every time", runID, deliveries),
		Hint:    "look for this run id in the worker logs (a tool that crashes the process?); after fixing the cause, resubmit it with if_run_exists resume",
	}
	if last, err := w.lastEvent(ctx, runID); err == nil && (last == nil || !last.IsTerminal()) {
		if rp, err := w.pub.Open(ctx, runID, enc); err == nil {
			_, _ = rp.Publish(ctx, &loop.RunFailed{Error: info})
			if err := rp.Close(ctx); err != nil {
				w.log.Warn("dead letter: publishing run_failed failed", "run_id", runID, "error", err)
			}
		}
	}
	_, _ = w.st.Runs().Modify(ctx, runID, func(r *store.RunRecord) error {
		if r.Status == store.RunCompleted {
			return nil
		}
		r.Status, r.Error, r.FinishedAt = store.RunFailed, &info, w.cfg.Clock().UTC()
		return nil
	})
	w.m.failed.WithLabelValues("", TypeMaxDeliveries).Inc()
	w.log.Warn("dead letter: run failed after max deliveries", "run_id", runID, "deliveries", deliveries)
}
