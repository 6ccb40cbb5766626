package compaction_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// TestConcurrentRuns shares one policy, one store, one summarizer and one
// discovering provider between many runs: each run's views must equal
// those of the same run alone (run with -race).
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	policy := func() *compaction.Compaction {
		return compaction.New(compaction.Config{ReserveOutputTokens: 2000, Summarizer: &fakeSummarizer{},
			Store: compaction.NewMemoryStore(0)})
	}
	d := &discoverer{provider: *newProvider(), window: 20000}
	run := func(c *compaction.Compaction) [][]byte {
		s := newSession(t, c)
		s.p, s.hashOnly = d, true
		for range 100 {
			s.grow()
			s.compact()
		}
		return s.views
	}
	want := run(policy())

	shared := policy()
	const runs = 16
	got := make([][][]byte, runs)
	var wg sync.WaitGroup
	for g := range runs {
		wg.Go(func() { got[g] = run(shared) })
	}
	wg.Wait()
	for g := range runs {
		require.Len(t, got[g], len(want))
		for k := range want {
			require.True(t, bytes.Equal(want[k], got[g][k]), "run %d step %d differs", g, k)
		}
	}
	require.EqualValues(t, 2, d.asked.Load(), "asked once per policy")
}
