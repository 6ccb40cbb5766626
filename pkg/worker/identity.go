package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/lovia-fleet/lovia/pkg/fleet"
)

// ErrDuplicateID is returned by Start when another live worker has this
// worker's id: two processes with one id answer each other's presence
// pings and share one holdings record, so a dead one's runs would wait for
// the ack wait instead of being taken over within seconds.
var ErrDuplicateID = errors.New("worker: the worker id is in use")

// DuplicateIDError names the live worker that holds the id.
type DuplicateIDError struct {
	ID     string
	Holder fleet.Lease // zero when the lease could not be read
}

func (e *DuplicateIDError) Error() string {
	holder := "a live worker"
	if e.Holder.Instance != "" {
		holder = fmt.Sprintf("the live worker on host %s, pid %d, started %s", e.Holder.Host, e.Holder.PID, e.Holder.StartedAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("worker: worker id %q is in use by %s: stop that worker, or give this one another id (lovia worker --id NAME; Config.ID)", e.ID, holder)
}

func (e *DuplicateIDError) Is(target error) bool { return target == ErrDuplicateID }

// One id, one process. Start takes the id's lease (fleet.Lease) before
// the worker answers its presence pings, and confirms it once it does
// (confirmID); Stop releases it. The lease of a worker that is gone (its
// presence subject without responders, unchanged for TakeoverGrace: a
// kill -9) is taken over, so a worker restarted with its own id starts
// within about a second; a holder that answers refuses the start.

// claimID takes the lease of this worker's id, or fails with a
// DuplicateIDError naming the live holder.
func (w *Worker) claimID(ctx context.Context) error {
	host, _ := os.Hostname()
	w.instance = nuid.Next()
	w.lease = fleet.Lease{Instance: w.instance, Host: host, PID: os.Getpid(), StartedAt: w.started0}
	var (
		seen        uint64    // the revision of the lease found held
		absentSince time.Time // since when its holder has not answered
	)
	for {
		rev, err := w.fleet.CreateLease(ctx, w.cfg.ID, w.lease)
		if err == nil {
			w.leaseRev.Store(rev)
			return nil
		}
		if !errors.Is(err, fleet.ErrLeaseHeld) {
			return err
		}
		l, rev, found, err := w.fleet.ReadLease(ctx, w.cfg.ID)
		if err != nil {
			return err
		}
		if !found {
			continue // released meanwhile
		}
		live, err := w.answers(ctx)
		switch {
		case err != nil:
			return err
		case live:
			return &DuplicateIDError{ID: w.cfg.ID, Holder: l}
		case rev != seen:
			// A holder still starting has not subscribed yet: give it the
			// grace period to answer.
			seen, absentSince = rev, time.Now()
		case time.Since(absentSince) >= w.cfg.TakeoverGrace:
			next, err := w.fleet.TakeLease(ctx, w.cfg.ID, w.lease, rev)
			if errors.Is(err, fleet.ErrLeaseChanged) {
				continue
			}
			if err != nil {
				return err
			}
			w.leaseRev.Store(next)
			w.predecessor = true
			w.log.Info("took over the id of a worker that is gone", "previous_host", l.Host, "previous_pid", l.PID, "previous_started_at", l.StartedAt)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers reports whether a process answers this worker's presence
// subject. Only an answer counts: a ping that finds no responders, or
// only subscribers that do not answer (a wildcard subscription, such as
// nats sub '>'), times out, and so does one to a holder stalled longer than
// PingTimeout, which the takeover grace then treats as gone.
func (w *Worker) answers(ctx context.Context) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, w.cfg.PingTimeout)
	defer cancel()
	_, err := w.cfg.Conn.RequestWithContext(pctx, w.presenceSubject(w.cfg.ID), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return false, nil
	}
	return false, fmt.Errorf("worker: ask whether worker id %q is in use: %w", w.cfg.ID, err)
}

// confirmID marks the lease live once the presence responder answers. A
// process that took the lease meanwhile (it found this one absent for
// the grace period: a start stalled that long) holds the id: this one is
// refused.
func (w *Worker) confirmID(ctx context.Context) error {
	live := w.lease
	live.Live = true
	next, err := w.fleet.TakeLease(ctx, w.cfg.ID, live, w.leaseRev.Load())
	if errors.Is(err, fleet.ErrLeaseChanged) {
		w.leaseRev.Store(0)
		l, _, _, _ := w.fleet.ReadLease(ctx, w.cfg.ID)
		return &DuplicateIDError{ID: w.cfg.ID, Holder: l}
	}
	if err != nil {
		return err
	}
	w.lease = live
	w.leaseRev.Store(next)
	return nil
}

// releasePredecessor releases the runs of the dead process whose id this
// worker took over (claimID): its holdings record is this id's, which no
// other worker's reaper releases while this one answers the id's pings —
// without this, they would wait for the ack wait. It runs before the
// claim loops start, so the record lists the predecessor's runs only.
func (w *Worker) releasePredecessor(ctx context.Context) {
	if !w.predecessor {
		return
	}
	w.predecessor = false
	h, err := w.st.Control().ReadHoldings(ctx, w.cfg.ID)
	if err != nil {
		w.log.Warn("reading the holdings of the worker whose id this one took over failed; its runs wait for the ack wait", "error", err)
		return
	}
	if !h.Deleted {
		w.releaseWorker(ctx, h)
	}
}

// checkID looks, after this worker's own reconnect, whether another
// process took its id over while it was cut off (it saw this one gone:
// its runs were handed on, and both now answer the id's pings), and says
// so: one of the two must stop.
func (w *Worker) checkID(ctx context.Context) {
	if w.leaseRev.Load() == 0 || !w.cfg.Conn.IsConnected() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	l, _, found, err := w.fleet.ReadLease(cctx, w.cfg.ID)
	if err != nil || !found || l.Instance == w.instance {
		return
	}
	w.log.Error("another process took this worker's id over while this one was cut off from NATS (its runs were handed on to other workers); stop this process, or the other one, and give each worker its own id",
		"holder_host", l.Host, "holder_pid", l.PID, "holder_started_at", l.StartedAt)
}

// releaseID deletes the lease at Stop (after the presence responder),
// unless another process holds it.
func (w *Worker) releaseID(ctx context.Context) {
	rev := w.leaseRev.Swap(0)
	if rev == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StoreTimeout)
	defer cancel()
	if err := w.fleet.ReleaseLease(rctx, w.cfg.ID, rev); err != nil && !errors.Is(err, fleet.ErrLeaseChanged) {
		w.log.Warn("releasing this worker's id failed; a worker started with it takes it over after a second", "error", err)
	}
}
