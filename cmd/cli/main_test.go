package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// make build links bin/worker and bin/gateway to bin/lovia: under those
// names the binary is that command.
func TestCommandArgsByName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ argv, want []string }{
		{[]string{"bin/lovia", "run", "hi"}, []string{"run", "hi"}},
		{[]string{"/usr/local/bin/worker", "--nats", "nats://n1:4222"}, []string{"worker", "--nats", "nats://n1:4222"}},
		{[]string{"./gateway"}, []string{"gateway"}},
		{[]string{"lovia"}, []string{}},
		{nil, nil},
	} {
		require.Equal(t, tc.want, commandArgs(tc.argv), tc.argv)
	}
}
