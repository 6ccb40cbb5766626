// Command natscli stands in for the nats CLI in the documentation's
// examples (test/docs runs them): `nats req SUBJECT BODY [-H K:V]...` and
// `nats sub SUBJECT [--all]`, against $NATS_URL, as the real one does them.
// It exits 1 on an error reply (Nats-Service-Error) or no reply, so an
// example whose request the fleet refuses fails the docs test. A `sub`
// ends at a run's terminal event (run_completed or run_failed) instead of
// running for ever, and fails when none arrives within a minute.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nats:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: nats req SUBJECT BODY [-H K:V]... | nats sub SUBJECT [--all]")
	}
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, nats.Name("docs nats stand-in"))
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch args[0] {
	case "req", "request":
		return request(ctx, nc, args[1:])
	case "sub", "subscribe":
		return subscribe(ctx, nc, args[1:])
	}
	return fmt.Errorf("the docs' stand-in knows req and sub, not %q", args[0])
}

func request(ctx context.Context, nc *nats.Conn, args []string) error {
	msg := nats.NewMsg("")
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-H" && i+1 < len(args):
			k, v, ok := strings.Cut(args[i+1], ":")
			if !ok {
				return fmt.Errorf("header %q: want K:V", args[i+1])
			}
			msg.Header.Add(k, v)
			i++
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("the docs' stand-in does not know the flag %s", a)
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) != 2 {
		return fmt.Errorf("req takes SUBJECT BODY, got %q", rest)
	}
	msg.Subject, msg.Data = rest[0], []byte(rest[1])
	rep, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return fmt.Errorf("request on %s: %w", msg.Subject, err)
	}
	fmt.Println(string(rep.Data))
	if e := rep.Header.Get("Nats-Service-Error"); e != "" {
		return fmt.Errorf("error reply on %s: %s (%s)", msg.Subject, e, rep.Header.Get("Nats-Service-Error-Code"))
	}
	return nil
}

// subscribe reads a run's events from the first (--all: from the stream)
// and stops at the terminal one.
func subscribe(ctx context.Context, nc *nats.Conn, args []string) error {
	subject, all := "", false
	for _, a := range args {
		switch {
		case a == "--all":
			all = true
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("the docs' stand-in does not know the flag %s", a)
		default:
			subject = a
		}
	}
	if !all {
		return errors.New("the docs' examples subscribe with --all (from the first event); a live subscription would wait for ever")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return fmt.Errorf("no stream holds %s: %w", subject, err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return err
	}
	for {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			fmt.Println(string(m.Data()))
			var ev struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(m.Data(), &ev)
			if ev.Type == "run_completed" || ev.Type == "run_failed" {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no terminal event on %s within a minute", subject)
		}
	}
}
