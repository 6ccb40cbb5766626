package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Holdings keys record the deliveries a worker holds, so a surviving
// worker can release the runs of a worker that is provably gone without
// waiting for the ack wait:
//
//	runs  hold.<worker>         the worker's marker: it may hold runs (a record of no runs)
//	      hold.<worker>.<run>   one delivery the worker holds (a record of one run)
//
// A worker writes its marker once, before its first run's key, puts a
// run's key when it claims the run and purges it (no marker left behind)
// when the run leaves it, so a claim or a release costs one small write
// whatever the number of runs the worker holds. Survivors watch the
// markers only (hold.*), and read a dead worker's run keys when they take
// its marker. Both values are holdings records (holdingscodec.go): the
// record of earlier releases, hold.<worker> listing every run its worker
// held (rewritten as a whole), is still read as the marker, its runs
// released too. A listed run is only a candidate: whoever releases it
// checks the run's record first (see worker's takeover). The older layout,
// own.<worker>.<run> (the ack subject alone), is still read by Owned.
func holdingsKey(worker string) string { return "hold." + worker }

// heldKey is the key of worker's delivery of run.
func heldKey(worker, run string) string { return "hold." + worker + "." + run }

// Holding is one delivery a worker holds: the run, the ack subject of the
// worker's delivery, the request's stream sequence and the attempt the
// worker's claim recorded.
type Holding struct {
	RunID   string `json:"run"`
	Ack     string `json:"ack"`
	Seq     uint64 `json:"seq,omitempty"`
	Attempt int    `json:"attempt"`
}

// Holdings is one worker's holdings record.
type Holdings struct {
	Worker   string
	Runs     []Holding
	Revision uint64
	Deleted  bool
}

// holdingsValue is the JSON record of earlier releases.
type holdingsValue struct {
	Runs []Holding `json:"runs"`
}

// SetHoldings replaces worker's holdings record with runs and returns the
// record's revision (for ClearHoldings).
func (c *Control) SetHoldings(ctx context.Context, worker string, runs []Holding) (uint64, error) {
	if err := checkID("set holdings", "worker id", worker); err != nil {
		return 0, err
	}
	val := encodeHoldings(runs)
	rev, err := c.b.put(ctx, holdingsKey(worker), val)
	if errors.Is(err, nats.ErrMaxPayload) {
		err = fmt.Errorf("the record of %d runs is %d bytes, over the server's max payload "+
			"(run fewer runs a worker, its concurrency, or raise the server's max_payload): %w", len(runs), len(val), err)
	}
	if err != nil {
		return 0, wrapErr("set holdings", worker, err)
	}
	return rev, nil
}

// AnnounceHoldings writes worker's marker, hold.<worker> (a record of no
// runs: a survivor of an earlier release reads it as a worker that holds
// nothing), which survivors watch; Hold's keys are read when a survivor
// takes the marker. It returns the marker's revision.
func (c *Control) AnnounceHoldings(ctx context.Context, worker string) (uint64, error) {
	return c.SetHoldings(ctx, worker, nil)
}

// holdFanOut bounds the writes Hold and Unhold have in flight at once.
const holdFanOut = 32

// Hold records the deliveries worker holds, each under its own key,
// hold.<worker>.<run> (replacing an earlier delivery of the same run):
// one write of about a hundred bytes a run, whatever else the worker
// holds. The writes are in flight together; the first error is returned
// (the writes that failed are the caller's to try again).
func (c *Control) Hold(ctx context.Context, worker string, runs []Holding) error {
	if err := checkID("hold", "worker id", worker); err != nil {
		return err
	}
	for _, h := range runs {
		if err := checkID("hold", "run id", h.RunID); err != nil {
			return err
		}
	}
	return fanOut(len(runs), func(i int) error {
		_, err := c.b.put(ctx, heldKey(worker, runs[i].RunID), encodeHoldings(runs[i:i+1]))
		return wrapErr("hold", runs[i].RunID, err)
	})
}

// Unhold removes the keys of runs worker no longer holds, leaving no
// marker behind (a purge of each key's subject on the bucket's stream).
func (c *Control) Unhold(ctx context.Context, worker string, runIDs []string) error {
	if err := checkID("unhold", "worker id", worker); err != nil {
		return err
	}
	for _, id := range runIDs {
		if err := checkID("unhold", "run id", id); err != nil {
			return err
		}
	}
	return fanOut(len(runIDs), func(i int) error {
		return wrapErr("unhold", runIDs[i], c.b.purge(ctx, heldKey(worker, runIDs[i])))
	})
}

// fanOut calls f(0…n-1), holdFanOut at a time, and returns the first
// error.
func fanOut(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range min(n, holdFanOut) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// ClearHoldings removes worker's holdings marker if it is still at
// revision rev (whatever its revision when rev is 0), and with it the keys
// of the runs the worker held (Hold). It reports whether it removed the
// marker; the run keys are removed only then.
func (c *Control) ClearHoldings(ctx context.Context, worker string, rev uint64) (bool, error) {
	if err := checkID("clear holdings", "worker id", worker); err != nil {
		return false, err
	}
	won := true
	switch err := c.b.purgeKey(ctx, holdingsKey(worker), rev); {
	case err == nil:
	case isCAS(err) || isNotFound(err) && rev != 0:
		return false, nil
	case isNotFound(err):
		won = false // no marker: its keys go all the same
	default:
		return false, wrapErr("clear holdings", worker, err)
	}
	if err := c.b.purge(ctx, holdingsKey(worker)+".*"); err != nil {
		return won, wrapErr("clear holdings", worker, err)
	}
	return won, nil
}

// WatchHoldings streams the changes of every worker's holdings record,
// starting with the current records, until ctx ends, through one watcher
// (one consumer). It streams which worker wrote or removed its record and
// at which revision, without the runs: the watcher takes only the
// entries' headers (a record lists every run its worker holds and is
// rewritten at every claim, and each worker watches every other's), and
// the runs are read with ReadHoldings when a worker is found gone.
func (c *Control) WatchHoldings(ctx context.Context) (<-chan Holdings, error) {
	return watchKeys(ctx, c.b, "hold.*", "watch holdings", func(e jetstream.KeyValueEntry) (Holdings, bool) {
		worker, ok := strings.CutPrefix(e.Key(), "hold.")
		if !ok || worker == "" {
			return Holdings{}, false
		}
		return Holdings{Worker: worker, Revision: e.Revision(), Deleted: e.Operation() != jetstream.KeyValuePut}, true
	}, jetstream.MetaOnly())
}

// ReadHoldings reads worker's holdings: its marker's revision, and the
// runs of its run keys and of the marker (an earlier release's record
// lists them there); a worker without a marker has Deleted set, with the
// runs of any keys it left.
func (c *Control) ReadHoldings(ctx context.Context, worker string) (Holdings, error) {
	if err := checkID("read holdings", "worker id", worker); err != nil {
		return Holdings{}, err
	}
	out := Holdings{Worker: worker, Deleted: true}
	e, err := c.b.get(ctx, holdingsKey(worker))
	switch {
	case isNotFound(err):
	case err != nil:
		return Holdings{}, wrapErr("read holdings", worker, err)
	default:
		runs, err := decodeHoldings(e.Value())
		if err != nil {
			return Holdings{}, wrapErr("read holdings", worker, err)
		}
		out.Runs, out.Revision, out.Deleted = runs, e.Revision(), false
	}
	entries, err := c.b.list(ctx, holdingsKey(worker)+".*")
	if err != nil {
		return Holdings{}, wrapErr("read holdings", worker, err)
	}
	for _, e := range entries {
		runs, err := decodeHoldings(e.Value())
		if err != nil {
			continue // a later release's, or damaged: the ack wait catches it
		}
		out.Runs = append(out.Runs, runs...)
	}
	return out, nil
}

// listedIn reports whether any worker's run key or holdings record lists
// run.
func (c *Control) listedIn(ctx context.Context, op, runID string) (bool, error) {
	keys, err := c.b.list(ctx, "hold.*."+runID)
	if err != nil {
		return false, wrapErr(op, runID, err)
	}
	if len(keys) > 0 {
		return true, nil
	}
	entries, err := c.b.list(ctx, "hold.*")
	if err != nil {
		return false, wrapErr(op, runID, err)
	}
	for _, e := range entries {
		runs, err := decodeHoldings(e.Value())
		if err != nil {
			continue
		}
		if slices.ContainsFunc(runs, func(h Holding) bool { return h.RunID == runID }) {
			return true, nil
		}
	}
	return false, nil
}
