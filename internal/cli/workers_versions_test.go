package cli

import "testing"

func TestAgentVersionsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agents   []string
		versions map[string]string
		want     string
	}{
		{[]string{"b", "a"}, map[string]string{"a": "0123456789ab+v1", "b": "ba9876543210"}, "b=ba9876543210,a=0123456789ab+v1"},
		{[]string{"a", "c"}, map[string]string{"a": "0123456789ab"}, "a=0123456789ab"},
		{[]string{"a"}, nil, "-"},
	} {
		if got := agentVersionsText(tc.agents, tc.versions); got != tc.want {
			t.Errorf("agentVersionsText(%v, %v) = %q, want %q", tc.agents, tc.versions, got, tc.want)
		}
	}
}
