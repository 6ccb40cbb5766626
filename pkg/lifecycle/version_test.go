package lifecycle_test

import (
	"errors"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// A run records the version its submission started on; each claim step
// records the claimer's; a resume on another version says which versions
// it crossed; a new submission starts on the claimer's version.
func TestClaimRecordsVersions(t *testing.T) {
	t.Parallel()
	claim := func(r store.RunRecord, c lifecycle.Claim) (store.RunRecord, lifecycle.Claimed) {
		t.Helper()
		c.Seq, c.Submission, c.Now = 1, max(r.Submissions, 1), t0
		out, cl, err := lifecycle.ClaimRun(r, c)
		if err != nil {
			t.Fatal(err)
		}
		return out, cl
	}
	r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
	r, cl := claim(r, lifecycle.Claim{Worker: "w1", Version: "v1"})
	if r.Version != "v1" || cl.StartedVersion != "v1" || cl.PreviousVersion != "" || r.Attempts[1].Version != "v1" {
		t.Fatalf("first claim: record version %q, claimed %+v, step %+v", r.Version, cl, r.Attempts[1])
	}
	r, _ = lifecycle.Release(r, lifecycle.Holder{Worker: "w1", Attempt: 1})
	r, cl = claim(r, lifecycle.Claim{Worker: "w2", Version: "v2"})
	last := r.Attempts[len(r.Attempts)-1]
	if r.Version != "v1" || cl.StartedVersion != "v1" || cl.PreviousVersion != "v1" || last.Kind != store.StepResume || last.Version != "v2" {
		t.Fatalf("resume on v2: record version %q, claimed %+v, step %+v", r.Version, cl, last)
	}
	// w2 dies: w3 (v3) takes over.
	r, cl = claim(r, lifecycle.Claim{Worker: "w3", Version: "v3", Gone: &lifecycle.Holder{Worker: "w2", Attempt: 2}})
	if cl.StartedVersion != "v1" || cl.PreviousVersion != "v2" || r.Attempts[len(r.Attempts)-1].Kind != store.StepTakeover {
		t.Fatalf("takeover on v3: claimed %+v, history %+v", cl, r.Attempts)
	}
	r, err := lifecycle.Finish(r, &loop.RunCompleted{Output: "ok"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = lifecycle.Resubmit(r)
	r, cl = claim(r, lifecycle.Claim{Worker: "w3", Version: "v3"})
	if r.Version != "v3" || cl.StartedVersion != "v3" {
		t.Fatalf("a new submission starts on its claimer's version: %q %+v", r.Version, cl)
	}
}

// With RouteVersions, a resume or takeover across versions is refused
// unless the claimer found the run's version absent; a first claim, a
// resume on the same version, and records or claimers without a version
// are never refused.
func TestClaimRoutesResumesByVersion(t *testing.T) {
	t.Parallel()
	started := func() store.RunRecord {
		r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"})
		r, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: 1, Submission: 1, Now: t0, Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	released := func() store.RunRecord {
		r, err := lifecycle.Release(started(), lifecycle.Holder{Worker: "w1", Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	unversioned := released()
	unversioned.Version = ""
	gone := &lifecycle.Holder{Worker: "w1", Attempt: 1}
	for name, tc := range map[string]struct {
		r       store.RunRecord
		c       lifecycle.Claim
		refused bool
	}{
		"resume on another version":        {released(), lifecycle.Claim{Version: "v2", RouteVersions: true}, true},
		"takeover on another version":      {started(), lifecycle.Claim{Version: "v2", RouteVersions: true, Gone: gone}, true},
		"resume, its version absent":       {released(), lifecycle.Claim{Version: "v2", RouteVersions: true, VersionAbsent: "v1"}, false},
		"resume, another version absent":   {released(), lifecycle.Claim{Version: "v2", RouteVersions: true, VersionAbsent: "v3"}, true},
		"resume on the same version":       {released(), lifecycle.Claim{Version: "v1", RouteVersions: true}, false},
		"resume without routing":           {released(), lifecycle.Claim{Version: "v2"}, false},
		"resume by a worker of no version": {released(), lifecycle.Claim{RouteVersions: true}, false},
		"resume of a run of no version":    {unversioned, lifecycle.Claim{Version: "v2", RouteVersions: true}, false},
		"first claim":                      {lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"}), lifecycle.Claim{Version: "v2", RouteVersions: true}, false},
		"a raw publish of an ended run":    {ended(t, released()), lifecycle.Claim{Version: "v2", RouteVersions: true}, false},
	} {
		tc.c.Worker, tc.c.Seq, tc.c.Now = "w2", 1, t0
		if tc.c.Submission == 0 && !tc.r.Status.Ended() {
			tc.c.Submission = max(tc.r.Submissions, 1)
		}
		_, _, err := lifecycle.ClaimRun(tc.r, tc.c)
		if got := errors.Is(err, lifecycle.ErrOtherVersion); got != tc.refused {
			t.Errorf("%s: refused %v (err %v), want %v", name, got, err, tc.refused)
		}
		if !tc.refused && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func ended(t *testing.T, r store.RunRecord) store.RunRecord {
	t.Helper()
	r, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: 1, Submission: 1, Now: t0, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err = lifecycle.Finish(r, &loop.RunCompleted{Output: "ok"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
