package runindex

import "testing"

// A schedule's fires are sched-<name>-<unix>: schedule "a" does not take
// the fires of schedule "a-1", nor a run id that only starts alike.
func TestFiredBy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		runID, name string
		want        bool
	}{
		{"sched-a-1796284800", "a", true},
		{"sched-a-1-1796284800", "a", false},
		{"sched-a-1-1796284800", "a-1", true},
		{"sched-a-", "a", false},
		{"sched-a-17x", "a", false},
		{"run-5", "a", false},
	} {
		if got := firedBy(c.runID, c.name); got != c.want {
			t.Errorf("firedBy(%q, %q) = %v, want %v", c.runID, c.name, got, c.want)
		}
	}
}
