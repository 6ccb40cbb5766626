package lifecycle

import "time"

// Delivery is what a worker knows of a delivered run request before it
// claims the run.
type Delivery struct {
	// FirstClaim is true for the request's first delivery. It decides
	// nothing on its own: a server that lost its consumer state delivers a
	// claimed request again as a first delivery.
	FirstClaim bool
	// Published is true when events of this request's submission are
	// stored already (an earlier claim published them; for a wake, the
	// claim that parked the run).
	Published bool
	// LastTerminal is true when the run's last stored event is terminal.
	LastTerminal bool
	// SnapshotCompleted is true when the run's checkpoint is finalized.
	SnapshotCompleted bool
	// Restart is true when the request asks for if_run_exists restart.
	Restart bool
}

// Action is what to do with a delivery.
type Action int

// Actions.
const (
	// Run claims the run and executes it.
	Run Action = iota
	// AckEnded acknowledges a redelivered request whose submission has
	// ended (its terminal event is out: the worker died before the ack),
	// recording the outcome in the index if it is missing there.
	AckEnded
	// Heal replays a completed run without publishing anything (a
	// completed run submitted again, or one whose ack was lost), healing
	// a session append the crash may have missed, and acknowledges it.
	Heal
)

func (a Action) String() string {
	switch a {
	case Run:
		return "run"
	case AckEnded:
		return "ack-ended"
	case Heal:
		return "heal"
	}
	return "unknown"
}

// Plan is the decision for a delivery.
type Plan struct {
	Action Action
	// Fresh is true when no claim of this submission has published
	// anything: the request's if_run_exists applies; any other claim
	// continues the submission (resume).
	Fresh bool
	// Replay is true when the run is completed and the loop only replays
	// its stored result.
	Replay bool
}

// Decide is the one place that decides, for a delivery, whether to run,
// replay (heal) or acknowledge it. Claim refusals (stale, in flight) come
// from [ClaimRun].
func Decide(d Delivery) Plan {
	// Events of this very request are stored: whatever the delivery count
	// says (a server that lost its consumer state after a restart delivers
	// a claimed request again as a first delivery), the submission is
	// under way and a claim continues it.
	p := Plan{Fresh: !d.Published}
	p.Replay = d.SnapshotCompleted && (!d.Restart || !p.Fresh)
	switch {
	case d.Published && d.LastTerminal && !p.Replay:
		// Exactly one terminal event per submission.
		p.Action = AckEnded
	case p.Replay && (p.Fresh || d.LastTerminal):
		p.Action = Heal
	default:
		p.Action = Run
	}
	return p
}

// Outcome is how an execution of a claimed run ended.
type Outcome struct {
	// Fenced is true when another worker owns the run now (a fenced
	// checkpoint write, or events stored under this run's seqs).
	Fenced bool
	// PublishFailed is true when the run's events could not be published.
	PublishFailed bool
	// Started is true once the loop produced any event.
	Started bool
	// Failed is true when the loop returned an error.
	Failed bool
	// Interrupted is true when the error is the worker's shutdown, a
	// cancellation, or a transient store failure: nothing about the run.
	Interrupted bool
	// Terminal is true when the terminal event was published.
	Terminal bool
}

// Verdict is how a delivery is settled.
type Verdict struct {
	Settle Settlement
	// Delay is the NAK delay of a release (0: at once).
	Delay time.Duration
	// Reason says why, for logs.
	Reason string
}

// Settlement is what is done with the JetStream message of a delivery.
type Settlement int

// Settlements.
const (
	// Leave touches nothing: another worker holds the run.
	Leave Settlement = iota
	// Ack acknowledges the request: the submission ended (or parked).
	Ack
	// Nak releases the request for any worker, after Delay.
	Nak
	// Term terminates the request: it can never succeed.
	Term
	// Fail publishes run_failed for a run the loop refused, then
	// terminates the request.
	Fail
)

func (s Settlement) String() string {
	return [...]string{"leave", "ack", "nak", "term", "fail"}[s]
}

// Settle is the one place that decides how an execution's delivery is
// settled.
func Settle(o Outcome) Verdict {
	switch {
	case o.Fenced:
		return Verdict{Settle: Leave, Reason: "fenced: another worker owns the run"}
	case o.PublishFailed:
		return Verdict{Settle: Nak, Delay: time.Second, Reason: "event publishing failed"}
	case !o.Started && o.Failed && !o.Interrupted:
		return Verdict{Settle: Fail, Reason: "the loop refused the run before it started"}
	case !o.Terminal:
		return Verdict{Settle: Nak, Reason: "interrupted without a terminal event"}
	}
	return Verdict{Settle: Ack, Reason: "ended"}
}
