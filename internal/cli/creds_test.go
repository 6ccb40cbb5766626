package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"
)

// The CLI logs in to a NATS server that requires credentials (--nkey,
// here), says clearly when the server refuses it, and never prints a
// URL's password.
func TestNATSCredentials(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	url := s.ClientURL()
	lovia := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil))
		return errb.String(), code
	}

	errs, code := lovia("status", "--nats", url, "some-run")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "refused these credentials", "no credentials: the server refuses the connection")

	errs, _ = lovia("status", "--nats", url, "--nkey", seedFile, "some-run")
	require.NotContains(t, errs, "cannot connect", "logged in with the nkey: %s", errs)

	errs, code = lovia("status", "--nats", strings.Replace(url, "nats://", "nats://alice:s3cret@", 1), "some-run")
	require.Equal(t, ExitFailure, code)
	require.NotContains(t, errs, "s3cret", "a URL's password is never printed")
	require.Contains(t, errs, "alice")

	errs, code = lovia("status", "--nats", url, "--nkey", seedFile, "--creds", seedFile, "x")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "give one")
}
