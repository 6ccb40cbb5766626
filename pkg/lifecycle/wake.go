package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// WakeRun takes a parked run (one waiting for an approval decision on no
// worker) out of parking: it publishes the run's resume request to the
// runs stream and makes the [Wake] transition. It reports whether this
// call woke it; a run that is not parked is left alone.
//
// The API wakes a run when a decision for it is stored (a cancel
// ends a parked run instead, see [CancelUnheld]; a cancel that finds it
// running, parking, wakes it like a decision);
// workers wake it at its approval deadline, and the parking worker itself
// when a decision landed while it parked. Concurrent wakers publish under
// the same message id ("<run>[.<submission>].wake<seq>.<rev>", naming the
// park), so the stream keeps one request, and one compare-and-set on the
// run record wins. A waker that dies between the publish and the record
// update leaves a request that the next claim takes as usual: a claim of
// a parked run is refused to every request but this park's wake.
func WakeRun(ctx context.Context, js jetstream.JetStream, names bus.Names, st *store.Store, runID string) (bool, error) {
	e, err := st.Runs().Get(ctx, runID)
	if err != nil {
		return false, err
	}
	return WakeEntry(ctx, js, names, st, e)
}

// WakeEntry is WakeRun of the run record e was just read at.
func WakeEntry(ctx context.Context, js jetstream.JetStream, names bus.Names, st *store.Store, e *store.RunEntry) (bool, error) {
	rec := &e.Record
	runID := rec.RunID
	if rec.Status != Parked || rec.Parked == nil {
		return false, nil
	}
	p := rec.Parked
	// One message id per park (the parking request's sequence and the
	// park timer's revision name it): concurrent wakers of this park
	// publish one request, and a wake of a later park — even one parked by
	// the same request, redelivered — is never dropped as a repeat.
	seq, err := bus.PublishRequest(ctx, js, names, rec.Agent, p.Request, bus.RequestMeta{
		RunID: runID, Suffix: fmt.Sprintf(".wake%d.%d", p.Continues, p.TimerRevision),
		ContentType: p.ContentType, Submission: max(rec.Submissions, 1), Continues: p.Continues,
		Trace: p.Trace,
	})
	if err != nil {
		return false, fmt.Errorf("wake run %s: %w", runID, err)
	}
	next, err := Wake(*rec, seq)
	if err != nil {
		return false, nil
	}
	e.Record = next
	if err := st.Runs().Update(ctx, e); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, nil // another waker, or the claim of this request, came first
		}
		return false, fmt.Errorf("wake run %s: %w", runID, err)
	}
	if err := st.Control().ClearParkTimer(ctx, runID, p.TimerRevision); err != nil {
		return true, fmt.Errorf("wake run %s: the run is queued, but its park timer stays (harmless): %w", runID, err)
	}
	return true, nil
}
