package lifecycle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	must := func(r store.RunRecord, err error) store.RunRecord {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	claim := func(r store.RunRecord, worker string, seq, continues uint64, gone *lifecycle.Holder) store.RunRecord {
		t.Helper()
		out, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: worker, Seq: seq, Submission: max(r.Submissions, 1), Continues: continues, Now: t0, Gone: gone})
		return must(out, err)
	}
	kinds := func(r store.RunRecord) string {
		s := ""
		for _, a := range r.Attempts {
			s += fmt.Sprintf("%d:%s/%d/%s ", a.N, a.Kind, a.Attempt, a.Worker)
		}
		return s
	}

	t.Run("a run's life is its history", func(t *testing.T) {
		r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
		r = must(lifecycle.Requeue(r))
		r = claim(r, "w1", 1, 0, nil)
		r = must(lifecycle.Release(r, lifecycle.Holder{Worker: "w1", Attempt: 1}))
		r = claim(r, "w2", 1, 0, nil)
		r = claim(r, "w3", 1, 0, &lifecycle.Holder{Worker: "w2", Attempt: 2}) // w2 died
		r = must(lifecycle.Park(r, lifecycle.Holder{Worker: "w3", Attempt: 3}, store.Parking{CallID: "c1", Continues: 1}))
		r = must(lifecycle.Wake(r, 2))
		r = claim(r, "w1", 2, 1, nil)
		r = must(lifecycle.Finish(r, &loop.RunCompleted{Output: "ok"}, t0))
		r = must(lifecycle.Resubmit(r))
		r = claim(r, "w2", 3, 0, nil)
		want := "1:submit/0/ 2:requeue/0/ 3:claim/1/w1 4:release/1/w1 5:resume/2/w2 6:takeover/3/w3 7:park/3/w3 8:wake/3/ 9:resume/4/w1 10:complete/4/ 11:resubmit/4/ 12:claim/5/w2 "
		if got := kinds(r); got != want {
			t.Fatalf("history:\n got  %s\n want %s", got, want)
		}
		if !r.Attempts[2].At.Equal(t0) || !r.Attempts[1].At.IsZero() {
			t.Fatalf("a claim carries its time, a requeue leaves it to the write: %+v", r.Attempts[:3])
		}
	})

	t.Run("the history keeps the last steps and counts the others", func(t *testing.T) {
		r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
		for i := range store.MaxAttempts + 10 {
			r = claim(r, "w1", uint64(i+1), 0, nil)
			r = must(lifecycle.Release(r, lifecycle.Holder{Worker: "w1", Attempt: r.Attempt}))
		}
		total := 1 + 2*(store.MaxAttempts+10)
		if len(r.Attempts) != store.MaxAttempts || r.AttemptsDropped != total-store.MaxAttempts {
			t.Fatalf("kept %d, dropped %d of %d steps", len(r.Attempts), r.AttemptsDropped, total)
		}
		if last := r.Attempts[len(r.Attempts)-1]; last.N != total || last.Kind != store.StepRelease {
			t.Fatalf("last step %+v, want release number %d", last, total)
		}
	})

	t.Run("a transition leaves its input's history alone", func(t *testing.T) {
		in := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
		in.Attempts = append(make([]store.Attempt, 0, 8), in.Attempts...) // spare capacity
		a := claim(in, "w1", 1, 0, nil)
		b := claim(in, "w2", 1, 0, nil)
		if len(in.Attempts) != 1 || a.Attempts[1].Worker != "w1" || b.Attempts[1].Worker != "w2" {
			t.Fatalf("histories share an array: in %+v a %+v b %+v", in.Attempts, a.Attempts, b.Attempts)
		}
	})
}

// A claim whose time was taken before another writer's step (the waker's
// wake, stamped when written) is not placed before it.
func TestHistoryTimesNeverGoBack(t *testing.T) {
	t.Parallel()
	r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
	r.Attempts[0].At = t0.Add(time.Second) // as the write stamped it
	out, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: 1, Submission: 1, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Attempts[1].At; !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("the claim's step is at %v, before the submit's %v", got, r.Attempts[0].At)
	}
}
