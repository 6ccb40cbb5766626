package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A worker id is held by one process at a time: its lease (key id.<worker>)
// names the process that holds it. A worker creates it at start-up, before
// it answers its presence pings, confirms it (Live) once it does, and
// deletes it when it stops; a process that finds the lease held asks the
// holder's presence subject, and takes the lease over (a compare-and-set at
// the revision it read) only once the holder has stayed absent — a worker
// killed with kill -9, whose presence the server drops with its
// connection. The compare-and-set settles a race: of two processes that
// start with one id, one holds the lease and the other is refused.

// Lease is the process that holds a worker id.
type Lease struct {
	// Instance is unique to the process (a fresh id at each start).
	Instance  string    `json:"instance"`
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Live is set once the holder answers its presence pings.
	Live bool `json:"live,omitempty"`
}

// ErrLeaseHeld is returned by CreateLease when another process holds the
// id; ErrLeaseChanged by TakeLease and ReleaseLease when the lease is not
// at the given revision any more (another process took it).
var (
	ErrLeaseHeld    = errors.New("fleet: the worker id is held")
	ErrLeaseChanged = errors.New("fleet: the worker id's lease changed")
)

const leasePrefix = "id."

// CreateLease creates the lease of worker id for l, and returns its
// revision; ErrLeaseHeld when the id has one.
func (r *Registry) CreateLease(ctx context.Context, worker string, l Lease) (uint64, error) {
	data, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	rev, err := r.kv.Create(ctx, leasePrefix+worker, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrLeaseHeld
	}
	if err != nil {
		return 0, fmt.Errorf("fleet: lease of worker id %s: %w", worker, err)
	}
	return rev, nil
}

// ReadLease returns the lease of worker id and its revision; found is
// false when it has none.
func (r *Registry) ReadLease(ctx context.Context, worker string) (l Lease, rev uint64, found bool, err error) {
	e, err := r.kv.Get(ctx, leasePrefix+worker)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Lease{}, 0, false, nil
	}
	if err != nil {
		return Lease{}, 0, false, fmt.Errorf("fleet: read the lease of worker id %s: %w", worker, err)
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return Lease{}, e.Revision(), true, nil // unreadable: a holder of unknown origin
	}
	return l, e.Revision(), true, nil
}

// TakeLease replaces the lease of worker id at revision rev with l (a
// takeover, or the holder's confirmation) and returns the new revision;
// ErrLeaseChanged when the lease is not at rev.
func (r *Registry) TakeLease(ctx context.Context, worker string, l Lease, rev uint64) (uint64, error) {
	data, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	next, err := r.kv.Update(ctx, leasePrefix+worker, data, rev)
	if revisionMismatch(err) {
		return 0, ErrLeaseChanged
	}
	if err != nil {
		return 0, fmt.Errorf("fleet: take the lease of worker id %s: %w", worker, err)
	}
	return next, nil
}

// ReleaseLease deletes the lease of worker id if it is still at revision
// rev.
func (r *Registry) ReleaseLease(ctx context.Context, worker string, rev uint64) error {
	err := r.kv.Delete(ctx, leasePrefix+worker, jetstream.LastRevision(rev))
	if revisionMismatch(err) {
		return ErrLeaseChanged
	}
	if err != nil {
		return fmt.Errorf("fleet: release the lease of worker id %s: %w", worker, err)
	}
	return nil
}

// revisionMismatch reports a compare-and-set refused for its revision
// (wrong last sequence).
func revisionMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
