package skills_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// writeSkills writes files (path -> content) under a new folder.
func writeSkills(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return dir
}

func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body
}

// startJS starts an embedded NATS server with a temporary store.
func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func results(es []loop.Entry) []loop.Entry {
	var out []loop.Entry
	for _, e := range es {
		if e.Kind == loop.KindToolResult {
			out = append(out, e)
		}
	}
	return out
}
