package store

import (
	"slices"
	"time"
)

// Step kinds of a run's history ([RunRecord.Attempts]): each names the
// lifecycle transition that wrote it.
const (
	StepSubmit   = "submit"   // the API indexed the run
	StepResubmit = "resubmit" // a new submission of an ended run
	StepRequeue  = "requeue"  // its lost request was published again
	StepClaim    = "claim"    // a submission's first claim
	StepResume   = "resume"   // a claim after a release or a wake
	StepTakeover = "takeover" // a claim of a run whose holder is gone
	StepPark     = "park"     // parked on an approval, on no worker
	StepWake     = "wake"     // a parked run queued again
	StepRelease  = "release"  // its holder gave the claim back
	StepComplete = "complete" // its run_completed is out
	StepFail     = "fail"     // its run_failed is out
	StepReject   = "reject"   // its request was invalid
	StepAbandon  = "abandon"  // no worker held it and its request was gone
	StepRepair   = "repair"   // the index settled it from its terminal event
	StepHeal     = "heal"     // the index learnt a result it had missed
	StepCancel   = "cancel"   // cancelled while no worker held it
)

// MaxAttempts is how many steps a record's history keeps; older ones are
// dropped and counted in [RunRecord.AttemptsDropped].
const MaxAttempts = 50

// Attempt is one step of a run's life: a claim, a resume, a park, a wake,
// a release, an outcome.
type Attempt struct {
	// N numbers the step, 1 for the run's first, counting dropped ones.
	N    int    `json:"n" msgpack:"n"`
	Kind string `json:"kind" msgpack:"kind"`
	// Attempt is the run's claim count after the step.
	Attempt int `json:"attempt" msgpack:"attempt"`
	// Worker is the worker that made the step, when one did.
	Worker string `json:"worker,omitempty" msgpack:"worker,omitempty"`
	// Version is the agent version of the worker that made a claim step
	// (claim, resume, takeover), when it gives one. A resume whose
	// version is not the record's [RunRecord.Version] ran the run on
	// other code than it started on.
	Version string `json:"version,omitempty" msgpack:"version,omitempty"`
	// At is the step's time; a transition that does not know the time
	// leaves it zero, and the write of the record stamps it.
	At time.Time `json:"at" msgpack:"at"`
}

// AddAttempt appends a step to the record's history, keeping the last
// MaxAttempts, at at (or the previous step's time, if later). It never writes into the backing array of the slice it was
// given (a transition's caller keeps its record as it was).
func (r *RunRecord) AddAttempt(kind, worker string, at time.Time) {
	r.addStep(Attempt{Kind: kind, Worker: worker, At: at})
}

// AddClaimStep is AddAttempt for a claim step made by a worker of agent
// version version ("" for none).
func (r *RunRecord) AddClaimStep(kind, worker, version string, at time.Time) {
	r.addStep(Attempt{Kind: kind, Worker: worker, Version: version, At: at})
}

func (r *RunRecord) addStep(step Attempt) {
	at := step.At
	n := r.AttemptsDropped + len(r.Attempts) + 1
	keep := r.Attempts
	if len(keep) >= MaxAttempts {
		drop := len(keep) - MaxAttempts + 1
		keep = keep[drop:]
		r.AttemptsDropped += drop
	}
	out := make([]Attempt, len(keep), len(keep)+1)
	copy(out, keep)
	if !at.IsZero() {
		at = at.UTC()
		// A step never precedes the one before it: a claim's time is taken
		// before it reads the record another writer may just have changed.
		if len(keep) > 0 && keep[len(keep)-1].At.After(at) {
			at = keep[len(keep)-1].At
		}
	}
	step.N, step.Attempt, step.At = n, r.Attempt, at
	r.Attempts = append(out, step)
}

// LastStep is the kind of the record's last step ("" without history).
func (r *RunRecord) LastStep() string {
	if len(r.Attempts) == 0 {
		return ""
	}
	return r.Attempts[len(r.Attempts)-1].Kind
}

// stampAttempts gives the steps a transition left without a time the time
// of the write.
func stampAttempts(r *RunRecord, now time.Time) {
	i := slices.IndexFunc(r.Attempts, func(a Attempt) bool { return a.At.IsZero() })
	if i < 0 {
		return
	}
	r.Attempts = slices.Clone(r.Attempts)
	for ; i < len(r.Attempts); i++ {
		if r.Attempts[i].At.IsZero() {
			r.Attempts[i].At = now
		}
	}
}
