package lifecycle

import (
	"errors"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// Refusals: a transition that does not apply to a run's record returns a
// [*Refusal] that matches one of these with errors.Is.
var (
	// ErrNotEnded refuses a resubmission of a run whose submission is
	// still queued, running or parked.
	ErrNotEnded = errors.New("the run's submission has not ended")
	// ErrNotQueued refuses a change to a queued run's request after a
	// worker claimed it.
	ErrNotQueued = errors.New("the run is not queued")
	// ErrStale refuses the claim of a request whose submission has ended
	// under another request or been superseded.
	ErrStale = errors.New("the request's submission has ended or been superseded")
	// ErrInFlight refuses the claim of a request of a run that is running
	// or parked under another request.
	ErrInFlight = errors.New("the run is in flight under another request")
	// ErrHeld refuses the claim of a run that another worker holds under
	// the same request (a redelivery the server made while the holder
	// lives): the claimer must check the holder first.
	ErrHeld = errors.New("another worker holds the run")
	// ErrOtherVersion refuses the resume of a run that started on another
	// agent version than the claimer's, when the claimer routes resumes to
	// their version (Claim.RouteVersions): the claimer gives it back while
	// a live worker of that version serves the agent, and claims it with
	// Claim.VersionAbsent once none does.
	ErrOtherVersion = errors.New("the run started on another agent version")
	// ErrNotHolder refuses a transition made under a claim that is no
	// longer the run's current one: another worker claimed it since.
	ErrNotHolder = errors.New("the claim is not the run's current one")
	// ErrNotParked refuses the wake of a run that is not parked.
	ErrNotParked = errors.New("the run is not parked")
	// ErrEnded refuses a change that would overwrite a run's outcome.
	ErrEnded = errors.New("the run has ended")
	// ErrNotTerminal refuses to finish a run on an event that is not
	// run_completed or run_failed.
	ErrNotTerminal = errors.New("the event is not terminal")
	// ErrNotStuck refuses a repair or abandon of a run that is not stuck.
	ErrNotStuck = errors.New("the run is not stuck")
)

// Refusal is a transition that did not apply: which one, the state it met
// and why (one of the Err* sentinels).
type Refusal struct {
	Transition string
	State      store.RunStatus
	Err        error
}

func (e *Refusal) Error() string {
	return fmt.Sprintf("lifecycle: %s of a %s run refused: %v", e.Transition, e.State, e.Err)
}

// Unwrap returns the sentinel.
func (e *Refusal) Unwrap() error { return e.Err }

func refuse(transition string, r store.RunRecord, err error) error {
	return &Refusal{Transition: transition, State: r.Status, Err: err}
}
