package worker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// ControlSubject is where the API notifies workers that a run's control
// state changed (an approval was decided, a cancel requested):
// "<prefix>.control.<run_id>". The state itself is in the store; the
// notification only saves the owner a poll.
func ControlSubject(prefix, runID string) string {
	n, _ := bus.NewNames(prefix)
	return n.Control(runID)
}

// onControl handles a control notification for a run this worker owns.
func (w *Worker) onControl(m *nats.Msg) {
	runID := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	w.mu.Lock()
	ar := w.active[runID]
	w.mu.Unlock()
	if ar == nil {
		return
	}
	ar.controlSeen.Store(true)
	select {
	case ar.notify <- struct{}{}:
	default:
	}
	if mb := ar.loadMailbox(); mb != nil {
		mb.touch() // perhaps an inject: read the mailbox at the next turn
	}
	w.applyCancel(context.Background(), runID, ar)
}

// approvalHandler waits for a decision stored by the API until the
// approval deadline (the agent's approval timeout after the call was first
// asked about, kept across parks and takeovers) and denies the call when
// none comes. A wait longer than Config.ParkAfter parks the run, unless
// the deadline comes within a few seconds of the park.
func (w *Worker) approvalHandler(runID string, ar *activeRun, timeout time.Duration) loop.ApprovalHandler {
	return func(ctx context.Context, _ *loop.RunContext, call loop.ToolCall) (loop.ApprovalVerdict, string, error) {
		now := w.cfg.Clock()
		deadline, err := w.st.Control().ApprovalDeadline(ctx, runID, int(ar.submission.Load()), call.ID, now.Add(timeout))
		if err != nil {
			w.log.Warn("approval: reading the call's deadline failed; waiting the whole approval timeout", "run_id", runID, "call_id", call.ID, "error", err)
		}
		denial := fmt.Sprintf("no decision within the approval timeout of %s", timeout)
		expired := time.NewTimer(deadline.Sub(now))
		defer expired.Stop()
		var parkC <-chan time.Time
		// Park only when the deadline is comfortably later than the park:
		// a timer that came due while the run parks would find it not
		// parked yet.
		margin := w.cfg.TakeoverInterval + time.Second
		if w.cfg.ParkAfter > 0 && deadline.Sub(now) > w.cfg.ParkAfter+margin {
			park := time.NewTimer(w.cfg.ParkAfter)
			defer park.Stop()
			parkC = park.C
		}
		poll := time.NewTicker(500 * time.Millisecond)
		defer poll.Stop()
		for {
			d, err := w.st.Control().Decision(ctx, runID, int(ar.submission.Load()), call.ID)
			if err != nil && ctx.Err() == nil {
				w.log.Warn("approval: reading the decision failed; will retry", "run_id", runID, "call_id", call.ID, "error", err)
			}
			if d != nil {
				if d.Decision == loop.Approve {
					return loop.Allow, d.Reason, nil
				}
				return loop.Deny, d.Reason, nil
			}
			select {
			case <-ctx.Done():
				return "", "", context.Cause(ctx)
			case <-expired.C:
				return loop.Deny, denial, nil
			case <-parkC:
				// Stop the run at its checkpoint; execute parks it.
				ar.parking.Store(&parking{callID: call.ID, deadline: deadline, submission: int(ar.submission.Load())})
				ar.stop(errParked)
				return "", "", errParked
			case <-ar.notify:
			case <-poll.C:
			}
		}
	}
}
