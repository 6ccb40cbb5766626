package cli

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// devPortsFree fails at once when lovia dev's NATS port or HTTP address
// is taken, naming the flag that picks another: the embedded server
// would only say so after its ten-second ready timeout, and the gateway
// once the server and the workers had started. Port 0 is always free.
func devPortsFree(natsPort int, httpAddr string) error {
	if natsPort > 0 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(natsPort))
		if err := listenable(addr, "NATS port "+strconv.Itoa(natsPort), "another lovia dev, or a nats-server?"); err != nil {
			return fmt.Errorf("dev: %w: stop it, or start with --nats-port N (0 picks a free port)", err)
		}
	}
	if err := listenable(httpAddr, "HTTP address "+httpAddr, "another lovia dev?"); err != nil {
		return fmt.Errorf("dev: %w: stop it, or start with --http ADDR (127.0.0.1:0 picks a free port)", err)
	}
	return nil
}

// listenable returns an error naming what (and who may hold it) when addr
// cannot be listened on now.
func listenable(addr, what, who string) error {
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use (%s)", what, who)
	}
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", what, err)
	}
	return l.Close()
}
