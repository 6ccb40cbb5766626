package lifecycle_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixture is a run in state s: submission 1, claimed by w1 (attempt 1)
// under the request stored at seq 10; a parked one was parked by that
// request after publishing seq 5.
func fixture(s store.RunStatus) store.RunRecord {
	r := store.RunRecord{RunID: "r1", Agent: "a", Status: s, Worker: "w1", Attempt: 1, Submissions: 1, RequestSeq: 10, UpdatedAt: t0}
	if s == lifecycle.Parked {
		r.Parked = &store.Parking{CallID: "c1", Continues: 10, LastSeq: 5}
	}
	return r
}

type event struct {
	name  string
	apply func(store.RunRecord) (store.RunRecord, error)
}

func claim(seq uint64, submission int, continues uint64) func(store.RunRecord) (store.RunRecord, error) {
	return func(r store.RunRecord) (store.RunRecord, error) {
		out, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: seq, Submission: submission, Continues: continues, Now: t0, Gone: &lifecycle.Holder{Worker: "w1", Attempt: 1}})
		return out, err
	}
}

var events = []event{
	{"resubmit", lifecycle.Resubmit},
	{"record-request", func(r store.RunRecord) (store.RunRecord, error) { return lifecycle.RecordRequest(r, 11) }},
	{"requeue", lifecycle.Requeue},
	{"claim-own", claim(10, 1, 0)}, // the run's own request, redelivered
	{"claim-held", func(r store.RunRecord) (store.RunRecord, error) { // the own request while w1 holds it
		out, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1, Now: t0})
		return out, err
	}},
	{"claim-other", claim(11, 1, 0)}, // a later request of the same submission
	{"claim-raw", claim(12, 0, 0)},   // a raw publish (no submission stated)
	{"claim-old", claim(9, 1, 0)},    // a request older than the recorded one
	{"claim-wake", claim(11, 1, 10)}, // the wake of the park of request 10
	{"park", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Park(r, lifecycle.Holder{Worker: "w1", Attempt: 1}, store.Parking{CallID: "c1", Continues: 10})
	}},
	{"park-other", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Park(r, lifecycle.Holder{Worker: "w2", Attempt: 1}, store.Parking{CallID: "c1", Continues: 10})
	}},
	{"wake", func(r store.RunRecord) (store.RunRecord, error) { return lifecycle.Wake(r, 11) }},
	{"release", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Release(r, lifecycle.Holder{Worker: "w1", Attempt: 1})
	}},
	{"release-other", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Release(r, lifecycle.Holder{Worker: "w2", Attempt: 1})
	}},
	{"complete", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Finish(r, &loop.RunCompleted{Output: "ok", Turns: 1}, t0)
	}},
	{"fail", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Finish(r, &loop.RunFailed{Error: loop.ErrorInfo{Type: "X"}}, t0)
	}},
	{"reject", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Reject(r, loop.ErrorInfo{Type: "InvalidRequest"}, "w2", t0, 99, 1)
	}},
	{"repair", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Repair(r, &loop.RunCompleted{Output: "ok"}, t0.Add(time.Second))
	}},
	{"abandon", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Abandon(r, loop.ErrorInfo{Type: "RunLost"}, t0)
	}},
	{"cancel-unheld", func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.CancelUnheld(r, loop.ErrorInfo{Type: "RunCancelled"}, t0, 20)
	}},
}

// want is the table of the package doc: for each event, the state it
// leads to from queued, running, parked, completed and failed, or the
// refusal (!sentinel).
var want = map[string][5]string{
	//                 queued         running        parked         completed      failed
	"resubmit":       {"!NotEnded", "!NotEnded", "!NotEnded", "queued", "queued"},
	"record-request": {"queued", "!NotQueued", "!NotQueued", "!NotQueued", "!NotQueued"},
	"requeue":        {"queued", "!NotQueued", "!NotQueued", "!NotQueued", "!NotQueued"},
	"claim-own":      {"running", "running", "running", "running", "running"},
	"claim-held":     {"running", "!Held", "running", "running", "running"},
	"claim-other":    {"running", "!InFlight", "!InFlight", "!Stale", "!Stale"},
	"claim-raw":      {"running", "!InFlight", "!InFlight", "running", "running"},
	"claim-old":      {"!Stale", "!Stale", "!Stale", "!Stale", "!Stale"},
	"claim-wake":     {"running", "!InFlight", "running", "!Stale", "!Stale"},
	"park":           {"!NotHolder", "parked", "!NotHolder", "!NotHolder", "!NotHolder"},
	"park-other":     {"!NotHolder", "!NotHolder", "!NotHolder", "!NotHolder", "!NotHolder"},
	"wake":           {"!NotParked", "!NotParked", "queued", "!NotParked", "!NotParked"},
	"release":        {"!NotHolder", "queued", "!NotHolder", "!NotHolder", "!NotHolder"},
	"release-other":  {"!NotHolder", "!NotHolder", "!NotHolder", "!NotHolder", "!NotHolder"},
	"complete":       {"completed", "completed", "completed", "completed", "completed"},
	"fail":           {"failed", "failed", "failed", "!Ended", "failed"},
	"reject":         {"!InFlight", "!InFlight", "!InFlight", "!Ended", "!Ended"},
	"repair":         {"!NotStuck", "completed", "!NotStuck", "!NotStuck", "!NotStuck"},
	"abandon":        {"failed", "failed", "!NotStuck", "!NotStuck", "!NotStuck"},
	"cancel-unheld":  {"failed", "!Held", "failed", "!Ended", "!Ended"},
}

// wantStep is the history step each transition that is not refused
// appends to the record (store.RunRecord.Attempts), from each state; ""
// appends none, "a+b" two. The fixture has attempt 1 and no history, so a claim of its
// queued run resumes it.
var wantStep = map[string][5]string{
	//                 queued      running     parked      completed   failed
	"resubmit":       {"", "", "", "resubmit", "resubmit"},
	"record-request": {"", "", "", "", ""},
	"requeue":        {"requeue", "", "", "", ""},
	"claim-own":      {"resume", "takeover", "resume", "claim", "claim"},
	"claim-held":     {"resume", "", "resume", "claim", "claim"},
	"claim-other":    {"resume", "", "", "", ""},
	"claim-raw":      {"resume", "", "", "claim", "claim"},
	"claim-old":      {"", "", "", "", ""},
	"claim-wake":     {"resume", "", "wake+resume", "", ""}, // the wake's claim came before the waker's update
	"park":           {"", "park", "", "", ""},
	"park-other":     {"", "", "", "", ""},
	"wake":           {"", "", "wake", "", ""},
	"release":        {"", "release", "", "", ""},
	"release-other":  {"", "", "", "", ""},
	"complete":       {"complete", "complete", "complete", "complete", "complete"},
	"fail":           {"fail", "fail", "fail", "", "fail"},
	"reject":         {"", "", "", "", ""},
	"repair":         {"", "repair", "", "", ""},
	"abandon":        {"abandon", "abandon", "", "", ""},
	"cancel-unheld":  {"cancel", "", "cancel", "", ""},
}

var sentinels = map[string]error{
	"NotEnded": lifecycle.ErrNotEnded, "NotQueued": lifecycle.ErrNotQueued, "Stale": lifecycle.ErrStale,
	"InFlight": lifecycle.ErrInFlight, "Held": lifecycle.ErrHeld, "NotHolder": lifecycle.ErrNotHolder, "NotParked": lifecycle.ErrNotParked,
	"Ended": lifecycle.ErrEnded, "NotStuck": lifecycle.ErrNotStuck,
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	if len(want) != len(events) {
		t.Fatalf("the table has %d rows for %d events", len(want), len(events))
	}
	for _, ev := range events {
		row, ok := want[ev.name]
		if !ok {
			t.Fatalf("event %s has no row in the table", ev.name)
		}
		for i, s := range lifecycle.States() {
			t.Run(ev.name+"/"+string(s), func(t *testing.T) {
				in := fixture(s)
				got, err := ev.apply(in)
				exp := row[i]
				if name, ok := strings.CutPrefix(exp, "!"); ok {
					if !errors.Is(err, sentinels[name]) {
						t.Fatalf("%s from %s: want refusal %s, got state %s, err %v", ev.name, s, name, got.Status, err)
					}
					var ref *lifecycle.Refusal
					if !errors.As(err, &ref) || ref.State != s {
						t.Fatalf("%s from %s: refusal %v does not name the state", ev.name, s, err)
					}
					if fmt.Sprint(got) != fmt.Sprint(in) {
						t.Fatalf("%s from %s: a refused transition changed the record:\n in  %+v\n out %+v", ev.name, s, in, got)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s from %s: want %s, refused: %v", ev.name, s, exp, err)
				}
				if string(got.Status) != exp {
					t.Fatalf("%s from %s: want %s, got %s", ev.name, s, exp, got.Status)
				}
				var steps []string
				if w := wantStep[ev.name][i]; w != "" {
					steps = strings.Split(w, "+")
				}
				var added []string
				for _, a := range got.Attempts[len(in.Attempts):] {
					added = append(added, a.Kind)
				}
				if strings.Join(added, "+") != strings.Join(steps, "+") {
					t.Fatalf("%s from %s: want history steps %v, got %+v", ev.name, s, steps, got.Attempts)
				}
				if len(steps) > 0 && got.Attempts[len(got.Attempts)-1].Attempt != got.Attempt {
					t.Fatalf("%s from %s: the step names attempt %d, the record %d", ev.name, s, got.Attempts[len(got.Attempts)-1].Attempt, got.Attempt)
				}
			})
		}
	}
}

func TestClaimDetails(t *testing.T) {
	t.Parallel()
	t.Run("a claim counts its attempt and takes the request", func(t *testing.T) {
		r, c, err := lifecycle.ClaimRun(fixture(lifecycle.Queued), lifecycle.Claim{Worker: "w2", Seq: 11, Submission: 1, Now: t0})
		if err != nil || c.Attempt != 2 || r.Attempt != 2 || r.Worker != "w2" || r.RequestSeq != 11 || r.StartedAt.IsZero() || c.Submission != 1 {
			t.Fatalf("claim: %+v %+v %v", r, c, err)
		}
	})
	t.Run("a raw publish of an ended run is a new submission", func(t *testing.T) {
		r, c, err := lifecycle.ClaimRun(fixture(lifecycle.Failed), lifecycle.Claim{Worker: "w2", Seq: 12, Now: t0})
		if err != nil || r.Submissions != 2 || c.Submission != 2 || r.Error != nil {
			t.Fatalf("claim: %+v %+v %v", r, c, err)
		}
	})
	t.Run("the wake's claim continues after the park's last seq", func(t *testing.T) {
		parked := fixture(lifecycle.Parked)
		woken, err := lifecycle.Wake(parked, 11)
		if err != nil || woken.RequestSeq != 11 || woken.Wakes != 1 || woken.Parked == nil {
			t.Fatalf("wake: %+v %v", woken, err)
		}
		r, c, err := lifecycle.ClaimRun(woken, lifecycle.Claim{Worker: "w2", Seq: 11, Submission: 1, Continues: 10, Now: t0})
		if err != nil || c.ParkedLastSeq != 5 || r.Parked != nil {
			t.Fatalf("claim of the wake: %+v %+v %v", r, c, err)
		}
	})
	t.Run("a wake claimed before its waker's update is counted once", func(t *testing.T) {
		r, _, err := lifecycle.ClaimRun(fixture(lifecycle.Parked), lifecycle.Claim{Worker: "w2", Seq: 11, Submission: 1, Continues: 10, Now: t0})
		if err != nil || r.Wakes != 1 {
			t.Fatalf("claim of the wake: %+v %v", r, err)
		}
		if _, err := lifecycle.Wake(r, 11); !errors.Is(err, lifecycle.ErrNotParked) {
			t.Fatalf("the late waker: want not parked, got %v", err)
		}
	})
	t.Run("the parking request redelivered after the wake is stale", func(t *testing.T) {
		woken, _ := lifecycle.Wake(fixture(lifecycle.Parked), 11)
		if _, _, err := lifecycle.ClaimRun(woken, lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1}); !errors.Is(err, lifecycle.ErrStale) {
			t.Fatalf("want stale, got %v", err)
		}
	})
	t.Run("an earlier submission's request is stale", func(t *testing.T) {
		r := fixture(lifecycle.Queued)
		r.Submissions, r.RequestSeq = 2, 0
		if _, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: 13, Submission: 1}); !errors.Is(err, lifecycle.ErrStale) {
			t.Fatalf("want stale, got %v", err)
		}
	})
	t.Run("the first claim pins the registry revision; later claims keep it", func(t *testing.T) {
		r, c, err := lifecycle.ClaimRun(fixture(lifecycle.Queued), lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1, Registry: 7})
		if err != nil || r.Registry != 7 || c.Registry != 7 {
			t.Fatalf("first claim: %+v %+v %v", r, c, err)
		}
		r, c, err = lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w3", Seq: 10, Submission: 1, Registry: 9, Gone: &lifecycle.Holder{Worker: "w2", Attempt: 2}})
		if err != nil || r.Registry != 7 || c.Registry != 7 {
			t.Fatalf("a resume keeps the pinned revision: %+v %+v %v", r, c, err)
		}
		done, _ := lifecycle.Finish(r, &loop.RunCompleted{}, t0)
		again, _ := lifecycle.Resubmit(done)
		r, c, _ = lifecycle.ClaimRun(again, lifecycle.Claim{Worker: "w3", Seq: 12, Submission: 2, Registry: 9})
		if r.Registry != 9 || c.Registry != 9 {
			t.Fatalf("a new submission pins the current revision: %+v %+v", r, c)
		}
	})
	t.Run("a bad request fails a queued run only if it never ran", func(t *testing.T) {
		fresh := lifecycle.Submit(lifecycle.Submission{RunID: "r2", Agent: "a"})
		r, err := lifecycle.Reject(fresh, loop.ErrorInfo{Type: "InvalidRequest"}, "w2", t0, 99, 1)
		if err != nil || r.Status != lifecycle.Failed {
			t.Fatalf("reject of a run never claimed: %+v %v", r, err)
		}
		released, _ := lifecycle.Release(fixture(lifecycle.Running), lifecycle.Holder{Worker: "w1", Attempt: 1})
		if _, err := lifecycle.Reject(released, loop.ErrorInfo{}, "w2", t0, 99, 1); !errors.Is(err, lifecycle.ErrInFlight) {
			t.Fatalf("a released run (its own request resumes it) must not be failed by another request: %v", err)
		}
	})
	t.Run("a rejected submission's other copies are stale", func(t *testing.T) {
		// Two copies of a queued first submission's request (the API's
		// requeue); one is invalid.
		fresh := lifecycle.Submit(lifecycle.Submission{RunID: "r3", Agent: "a"})
		r, err := lifecycle.Reject(fresh, loop.ErrorInfo{Type: "InvalidRequest"}, "w2", t0, 10, 1)
		if err != nil || r.RequestSeq != 10 {
			t.Fatalf("a reject records its request: %+v %v", r, err)
		}
		for _, seq := range []uint64{7, 12} {
			if _, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: seq, Submission: 1}); !errors.Is(err, lifecycle.ErrStale) {
				t.Fatalf("copy %d of the rejected submission: want stale, got %v", seq, err)
			}
		}
		recorded, _ := lifecycle.RecordRequest(fresh, 12)
		if _, err := lifecycle.Reject(recorded, loop.ErrorInfo{}, "w2", t0, 10, 1); !errors.Is(err, lifecycle.ErrStale) {
			t.Fatalf("a copy superseded by the recorded request must not fail the run: %v", err)
		}
		again, _ := lifecycle.Resubmit(r)
		if _, err := lifecycle.Reject(again, loop.ErrorInfo{}, "w2", t0, 14, 1); !errors.Is(err, lifecycle.ErrStale) {
			t.Fatalf("a copy of an earlier submission must not fail the next one: %v", err)
		}
	})
	t.Run("a holder found gone a moment ago may have been replaced", func(t *testing.T) {
		r := fixture(lifecycle.Running)
		r.Worker, r.Attempt = "w3", 2 // another worker claimed since
		if _, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1, Gone: &lifecycle.Holder{Worker: "w1", Attempt: 1}}); !errors.Is(err, lifecycle.ErrHeld) {
			t.Fatalf("want held (by w3), got %v", err)
		}
	})
	t.Run("a heal of an older request leaves a newer submission alone", func(t *testing.T) {
		r := fixture(lifecycle.Running)
		r.RequestSeq = 12
		if _, err := lifecycle.HealOutcome(r, &loop.RunResult{}, t0, 10); !errors.Is(err, lifecycle.ErrInFlight) {
			t.Fatalf("want in flight, got %v", err)
		}
	})
	t.Run("resubmission clears the last outcome", func(t *testing.T) {
		done, _ := lifecycle.Finish(fixture(lifecycle.Running), &loop.RunCompleted{Output: "x"}, t0)
		r, err := lifecycle.Resubmit(done)
		if err != nil || r.Submissions != 2 || r.Result != nil || r.RequestSeq != 0 || r.Usage != nil {
			t.Fatalf("resubmit: %+v %v", r, err)
		}
	})
	t.Run("a repair needs the event to be newer than the record", func(t *testing.T) {
		if _, err := lifecycle.Repair(fixture(lifecycle.Running), &loop.RunCompleted{}, t0); !errors.Is(err, lifecycle.ErrNotStuck) {
			t.Fatalf("want not stuck, got %v", err)
		}
	})
	t.Run("a run cancelled with no holder runs no request of its submission", func(t *testing.T) {
		// Queued for its first request (seq 0: not recorded yet) when the
		// runs stream's last sequence was 20.
		fresh := lifecycle.Submit(lifecycle.Submission{RunID: "r4", Agent: "a"})
		r, err := lifecycle.CancelUnheld(fresh, loop.ErrorInfo{Type: "RunCancelled"}, t0, 20)
		if err != nil || r.Status != lifecycle.Failed || r.RequestSeq != 20 || r.Error.Type != "RunCancelled" || r.FinishedAt.IsZero() || r.Quiet {
			t.Fatalf("cancel: %+v %v", r, err)
		}
		for _, c := range []lifecycle.Claim{
			{Worker: "w1", Seq: 7, Submission: 1},                // its request, stored before the cancel
			{Worker: "w1", Seq: 20, Submission: 1},               // the last one stored before it
			{Worker: "w1", Seq: 21, Submission: 1},               // a requeue racing the cancel
			{Worker: "w1", Seq: 22, Submission: 1, Continues: 5}, // a wake racing it
			{Worker: "w1", Seq: 20},                              // a raw publish stored before it
		} {
			if _, _, err := lifecycle.ClaimRun(r, c); !errors.Is(err, lifecycle.ErrStale) {
				t.Fatalf("claim %+v of the cancelled submission: want stale, got %v", c, err)
			}
		}
		if _, err := lifecycle.Finish(r, &loop.RunFailed{Error: loop.ErrorInfo{Type: "X"}}, t0); !errors.Is(err, lifecycle.ErrEnded) {
			t.Fatalf("a redelivery's outcome must not replace the cancel: %v", err)
		}
		raw, c, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: 23, Now: t0})
		if err != nil || c.Submission != 2 || raw.Status != lifecycle.Running {
			t.Fatalf("a raw publish after the cancel is a new submission: %+v %+v %v", raw, c, err)
		}
		again, err := lifecycle.Resubmit(r)
		if err != nil || again.RequestSeq != 0 {
			t.Fatalf("resubmit: %+v %v", again, err)
		}
		if lifecycle.Unclaimed(again) || !lifecycle.Unclaimed(fresh) {
			t.Fatalf("a resubmission of a run the cancel told about is not unclaimed (its run_failed is out); a fresh one is")
		}
		if _, _, err := lifecycle.ClaimRun(again, lifecycle.Claim{Worker: "w1", Seq: 24, Submission: 2}); err != nil {
			t.Fatalf("the resubmission runs: %v", err)
		}
		parked := fixture(lifecycle.Parked)
		r, err = lifecycle.CancelUnheld(parked, loop.ErrorInfo{Type: "RunCancelled"}, t0, 3)
		if err != nil || r.Parked != nil || r.RequestSeq != 10 {
			t.Fatalf("a parked run keeps its later request as the horizon: %+v %v", r, err)
		}
	})
	t.Run("finish refuses an event that is not terminal", func(t *testing.T) {
		if _, err := lifecycle.Finish(fixture(lifecycle.Running), &loop.TurnStarted{}, t0); !errors.Is(err, lifecycle.ErrNotTerminal) {
			t.Fatalf("want not terminal, got %v", err)
		}
	})
}

func TestDecide(t *testing.T) {
	t.Parallel()
	type d = lifecycle.Delivery
	cases := []struct {
		name string
		in   d
		want lifecycle.Plan
	}{
		{"first delivery of a new run", d{FirstClaim: true}, lifecycle.Plan{Action: lifecycle.Run, Fresh: true}},
		{"a first delivery of a request whose events are out (a server restart)", d{FirstClaim: true, Published: true}, lifecycle.Plan{Action: lifecycle.Run}},
		{"a first delivery of a request that ended (a server restart lost the ack)", d{FirstClaim: true, Published: true, LastTerminal: true}, lifecycle.Plan{Action: lifecycle.AckEnded}},
		{"redelivery after a crash mid-run", d{Published: true}, lifecycle.Plan{Action: lifecycle.Run}},
		{"redelivery released before it started", d{}, lifecycle.Plan{Action: lifecycle.Run, Fresh: true}},
		{"redelivery after the terminal event, before the ack", d{Published: true, LastTerminal: true}, lifecycle.Plan{Action: lifecycle.AckEnded}},
		{"a completed run submitted again", d{FirstClaim: true, SnapshotCompleted: true}, lifecycle.Plan{Action: lifecycle.Heal, Fresh: true, Replay: true}},
		{"a completed run restarted", d{FirstClaim: true, SnapshotCompleted: true, Restart: true}, lifecycle.Plan{Action: lifecycle.Run, Fresh: true}},
		{"completed before the terminal event was out", d{Published: true, SnapshotCompleted: true}, lifecycle.Plan{Action: lifecycle.Run, Replay: true}},
		{"completed, terminal event out, ack lost", d{Published: true, SnapshotCompleted: true, LastTerminal: true}, lifecycle.Plan{Action: lifecycle.Heal, Replay: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := lifecycle.Decide(c.in); got != c.want {
				t.Fatalf("Decide(%+v) = %+v (%s), want %+v (%s)", c.in, got, got.Action, c.want, c.want.Action)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	type o = lifecycle.Outcome
	cases := []struct {
		name string
		in   o
		want lifecycle.Settlement
	}{
		{"fenced", o{Fenced: true, Started: true, Terminal: true}, lifecycle.Leave},
		{"publishing failed", o{PublishFailed: true, Started: true}, lifecycle.Nak},
		{"refused before it started", o{Failed: true}, lifecycle.Fail},
		{"shut down before it started", o{Failed: true, Interrupted: true}, lifecycle.Nak},
		{"interrupted mid-run", o{Started: true, Failed: true, Interrupted: true}, lifecycle.Nak},
		{"completed", o{Started: true, Terminal: true}, lifecycle.Ack},
		{"failed with its terminal event", o{Started: true, Failed: true, Terminal: true}, lifecycle.Ack},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := lifecycle.Settle(c.in); got.Settle != c.want {
				t.Fatalf("Settle(%+v) = %s, want %s", c.in, got.Settle, c.want)
			}
		})
	}
}
