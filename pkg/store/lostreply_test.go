package store

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// cutProxy forwards TCP between NATS clients and a server. Armed with a
// pattern, it forwards the client's next write containing it, then cuts
// the connection before the server's reply can come back: the server
// applied the request, the client never learns it did. Armed to hold, it
// also keeps that write from the server until a later write (on any
// connection) contains the pattern again: the lost request lands just
// before the next one.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    []byte
	hold   bool
	held   []byte   // a held write
	heldTo net.Conn // the server side it goes to
	conns  []net.Conn
	wg     sync.WaitGroup
	closed atomic.Bool
	fired  chan struct{}
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, fired: make(chan struct{}, 1)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) arm(pattern string, hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.hold = []byte(pattern), hold
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, s); _ = c.Close() }()
		go func() { defer p.wg.Done(); p.upstream(c, s) }()
	}
}

// upstream copies client → server, cutting both sides after an armed match
// (or, holding, the client side only).
func (p *cutProxy) upstream(c, s net.Conn) {
	keep := false
	defer func() {
		_ = c.Close()
		if !keep {
			_ = s.Close()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			var release []byte
			var releaseTo net.Conn
			if p.held != nil && bytes.Contains(buf[:n], p.cut) {
				release, releaseTo, p.held, p.cut = p.held, p.heldTo, nil, nil
			}
			hit := len(p.cut) > 0 && bytes.Contains(buf[:n], p.cut)
			hold := hit && p.hold && p.held == nil
			switch {
			case hold:
				p.held, p.heldTo = bytes.Clone(buf[:n]), s
			case hit:
				p.cut = nil
			}
			p.mu.Unlock()
			if release != nil {
				_, _ = releaseTo.Write(release)
				time.Sleep(100 * time.Millisecond) // the server stores it
				_ = releaseTo.Close()
			}
			if hold {
				keep = true
				_ = c.Close()
				p.fired <- struct{}{}
				return
			}
			if hit {
				// Drop the client before the request even reaches the
				// server, so that no reply can travel back.
				_ = c.Close()
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
			if hit {
				// Let the server read the request before its side closes.
				time.Sleep(50 * time.Millisecond)
				p.fired <- struct{}{}
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutProxy) close() {
	if p.closed.Swap(true) {
		return
	}
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// behindCutProxy starts a server and opens a store (with timeout, if not
// zero) over a connection through a cutProxy.
func behindCutProxy(t *testing.T, timeout time.Duration) (*server, *cutProxy, *nats.Conn, *Store) {
	t.Helper()
	srv := startServer(t, Config{})
	proxy := startCutProxy(t, strings.TrimPrefix(srv.emb.ClientURL(), "nats://"))
	nc, err := nats.Connect(proxy.url(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cfg := srv.cfg
	cfg.Timeout = timeout
	st, err := Open(t.Context(), js, cfg)
	require.NoError(t, err)
	return srv, proxy, nc, st
}

// TestCheckpointAppendAfterLostReply: a head write reaches the server but
// its reply is lost (the connection drops), so the writer does not know
// its append was stored. Its next append — the loop sends the same
// entries again on the revision it last knew, plus what came since — must
// continue from its own stored head, not be fenced by it, and store every
// entry once. Before heads carried the appending write's nonce, this
// fenced the run's only worker (seen as a shutdown that left a run waiting
// for the ack wait).
func TestCheckpointAppendAfterLostReply(t *testing.T) {
	t.Parallel()
	srv, proxy, nc, st := behindCutProxy(t, 0)
	reader := srv.open(t)
	cp := st.Checkpointer()
	ctx := t.Context()

	for _, tc := range []struct {
		name string
		// first appends before the lost one; 0 makes the lost one a create.
		first int
	}{{"create", 0}, {"update", 1}} {
		run := "run-lost-" + tc.name
		var (
			rev    uint64
			stored []loop.Entry
			err    error
		)
		for i := 1; i <= tc.first; i++ {
			rev, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: len(stored), Entries: turnEntries(i), Head: runHead(i), Revision: rev})
			require.NoError(t, err)
			stored = append(stored, turnEntries(i)...)
		}

		proxy.arm(run+".c.", false)
		lost := turnEntries(tc.first + 1)
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cp.Append(actx, run, loop.CheckpointWrite{Base: len(stored), Entries: lost, Head: runHead(tc.first + 1), Revision: rev})
		cancel()
		require.Error(t, err, "the reply was cut")
		require.NotErrorIs(t, err, loop.ErrFenced)
		select {
		case <-proxy.fired:
		default:
			t.Fatal("the proxy did not cut the head write")
		}
		got, err := reader.Checkpointer().Load(ctx, run)
		require.NoError(t, err)
		require.Len(t, got.Entries, len(stored)+len(lost), "the lost write was stored (the server applied it)")

		// The retry, as the loop sends it: same base and revision, the
		// unacknowledged entries again, plus the next turn's.
		next := turnEntries(tc.first + 2)
		require.Eventually(t, func() bool { return nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
		retry := append(append([]loop.Entry{}, lost...), next...)
		rev2, err := cp.Append(ctx, run, loop.CheckpointWrite{Base: len(stored), Entries: retry, Head: runHead(tc.first + 2), Revision: rev})
		require.NoError(t, err, "fenced by its own lost write")

		got, err = reader.Checkpointer().Load(ctx, run)
		require.NoError(t, err)
		want := append(append(stored, lost...), next...)
		require.Equal(t, want, got.Entries, "every entry once, in order")
		require.Equal(t, rev2, got.Revision)
		require.Equal(t, tc.first+2, got.Turns)

		// And the writer goes on from the revision it was given.
		_, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: len(want), Head: runHead(tc.first + 3), Revision: rev2})
		require.NoError(t, err)
	}
}

// TestLostWriteOverwrittenByAnotherWriterStillFences: when the lost write
// landed but another writer has since replaced the head, the retry is
// fenced as usual.
func TestLostWriteOverwrittenByAnotherWriterStillFences(t *testing.T) {
	t.Parallel()
	srv, proxy, nc, st := behindCutProxy(t, 0)
	other := srv.open(t)
	ctx := t.Context()
	const run = "run-lost-taken"

	rev, err := st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)
	proxy.arm(run+".c.", false)
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = st.Checkpointer().Append(actx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
	cancel()
	require.Error(t, err)

	// Another worker takes the run over and writes on top of it.
	snap, err := other.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	_, err = other.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 6, Entries: turnEntries(3), Head: runHead(3), Revision: snap.Revision})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	_, err = st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
	require.ErrorIs(t, err, loop.ErrFenced)
}

// TestCheckpointAppendRetriesALostReply: with no deadline of its own, an
// append whose head-write reply is lost (Config.Timeout passes) tries
// again by itself, finds its write stored, and succeeds: the caller sees
// one successful append and the entries are stored once.
func TestCheckpointAppendRetriesALostReply(t *testing.T) {
	t.Parallel()
	srv, proxy, _, st := behindCutProxy(t, time.Second)
	ctx := t.Context()
	const run = "run-lost-retry"

	rev, err := st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)
	proxy.arm(run+".c.", false)
	rev2, err := st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
	require.NoError(t, err, "the append retried its lost write")
	select {
	case <-proxy.fired:
	default:
		t.Fatal("the proxy did not cut the head write")
	}
	got, err := srv.open(t).Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(turnEntries(1), turnEntries(2)...), got.Entries)
	require.Equal(t, rev2, got.Revision)
}

// TestCheckpointLostWriteLandsLate: the lost head write reaches the server
// only after the retry has read the head (still the old one) and just
// before the retry's own head write, which then loses the compare-and-set
// to it. The retry must recognise its own write and carry on.
func TestCheckpointLostWriteLandsLate(t *testing.T) {
	t.Parallel()
	srv, proxy, nc, st := behindCutProxy(t, 0)
	ctx := t.Context()
	const run = "run-lost-late"

	rev, err := st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)
	// Match segment writes only ("HPUB $KV.<bucket>.<run>.c.<n>"), not
	// the retry's read of the last segment, which must still see the old
	// one.
	proxy.arm("PUB $KV."+st.checkpoints.b.name+"."+run+".c.", true)
	actx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = st.Checkpointer().Append(actx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
	cancel()
	require.Error(t, err)
	<-proxy.fired
	got, err := srv.open(t).Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Len(t, got.Entries, 3, "the lost write is held back")

	require.Eventually(t, func() bool { return nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	retry := append(turnEntries(2), turnEntries(3)...)
	_, err = st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: retry, Head: runHead(3), Revision: rev})
	require.NoError(t, err, "fenced by its own late write")
	got, err = srv.open(t).Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(turnEntries(1), retry...), got.Entries)
	require.Equal(t, 3, got.Turns)
}
