package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Holdings keys record, in one message per worker, the deliveries a
// worker holds, so a surviving worker can release the runs of a worker
// that is provably gone without waiting for the ack wait:
//
//	runs  hold.<worker>   the worker's holdings (holdingscodec.go; JSON in earlier releases)
//
// A worker rewrites its record as a whole (a group commit: the claims that
// arrive while a write is in flight share the next one) and drops the runs
// it no longer holds lazily, in its next write, so a listed run is only a
// candidate: whoever releases it checks the run's record first (see
// worker's takeover). The earlier layout, own.<worker>.<run> (one record a
// run, written at claim and cleared at settle), is still read by Owned.
func holdingsKey(worker string) string { return "hold." + worker }

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

// ClearHoldings removes worker's holdings record if it is still at
// revision rev (whatever its revision when rev is 0). It reports whether
// it removed it.
func (c *Control) ClearHoldings(ctx context.Context, worker string, rev uint64) (bool, error) {
	if err := checkID("clear holdings", "worker id", worker); err != nil {
		return false, err
	}
	if err := c.b.purgeKey(ctx, holdingsKey(worker), rev); err != nil {
		if isCAS(err) || isNotFound(err) {
			return false, nil
		}
		return false, wrapErr("clear holdings", worker, err)
	}
	return true, nil
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

// ReadHoldings reads worker's holdings record, with its runs; a worker
// without one has Deleted set.
func (c *Control) ReadHoldings(ctx context.Context, worker string) (Holdings, error) {
	if err := checkID("read holdings", "worker id", worker); err != nil {
		return Holdings{}, err
	}
	e, err := c.b.get(ctx, holdingsKey(worker))
	if isNotFound(err) {
		return Holdings{Worker: worker, Deleted: true}, nil
	}
	if err != nil {
		return Holdings{}, wrapErr("read holdings", worker, err)
	}
	runs, err := decodeHoldings(e.Value())
	if err != nil {
		return Holdings{}, wrapErr("read holdings", worker, err)
	}
	return Holdings{Worker: worker, Runs: runs, Revision: e.Revision()}, nil
}

// listedIn reports whether any holdings record lists run.
func (c *Control) listedIn(ctx context.Context, op, runID string) (bool, error) {
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
