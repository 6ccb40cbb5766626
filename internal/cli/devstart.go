package cli

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"syscall"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// devPortsFree fails at once when lovia dev's NATS port or HTTP address
// is taken or cannot be listened on, naming the flag that picks another:
// the embedded server would only say so after its ten-second ready
// timeout, and the gateway once the server and the workers had started.
// Port 0 is always free.
func devPortsFree(natsPort int, httpAddr string) error {
	if natsPort < 0 || natsPort > 65535 {
		return fmt.Errorf("dev: --nats-port %d is not a port: give 1-65535, or 0 for a free one", natsPort)
	}
	if natsPort > 0 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(natsPort))
		if err := listenable(addr, "NATS port "+strconv.Itoa(natsPort), "another lovia dev, or a nats-server?"); err != nil {
			return fmt.Errorf("dev: %w start with --nats-port N (0 picks a free port)", err)
		}
	}
	if err := listenable(httpAddr, "HTTP address "+httpAddr, "another lovia dev?"); err != nil {
		return fmt.Errorf("dev: %w start with --http HOST:PORT (127.0.0.1:0 picks a free port)", err)
	}
	return nil
}

// listenable returns an error naming what (and who may hold it) when addr
// cannot be listened on now; its text ends where the caller's "start
// with <flag>" follows.
func listenable(addr, what, who string) error {
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use (%s): stop what listens there, or", what, who)
	}
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w:", what, err)
	}
	return l.Close()
}

// devTry is the commands lovia dev's banner suggests, for an agent it
// serves: demo when it does, else the first of its agents.
func devTry(names bus.Names, agents []string, prefix string) string {
	agent, flag := "demo", ""
	if !slices.Contains(agents, "demo") && len(agents) > 0 {
		agent, flag = agents[0], " --agent "+agents[0]
	}
	if prefix != bus.DefaultPrefix {
		flag += " --prefix " + prefix
	}
	return fmt.Sprintf("  nats req %s '{\"agent\":%q,\"input\":\"What is 12*7?\"}'\n  lovia run%s \"What time is it?\"\n", names.APISubmit(), agent, flag)
}
