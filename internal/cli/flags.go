package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/client"
)

// flagSet builds a flag set that reports errors to stderr.
func flagSet(env *Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: %s %s %s\n\nflags:\n", env.program(), name, usage)
		printDefaults(env.Stderr, fs)
	}
	return fs
}

// printDefaults is flag.PrintDefaults without the default a flag's usage
// already states ("default $NATS_URL, then …"): the flag package would add
// the value it was set to from the environment a second time.
func printDefaults(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  -%s", f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 && name == "" { // a one-letter bool fits on the line
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(text, "\n", "\n    \t"))
		if f.DefValue != "" && !isZeroFlag(f) && !strings.Contains(text, "(default") {
			if name == "string" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
		b.Reset()
	})
}

// isZeroFlag reports whether f's default is its type's zero value, which
// flag.PrintDefaults leaves out too.
func isZeroFlag(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// parse parses flags that may be interspersed with positional arguments
// and returns the positionals. ok is false after a usage error (or -h).
func parse(fs *flag.FlagSet, args []string) (pos []string, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// natsFlags are the flags of every command that talks to a fleet.
type natsFlags struct {
	url                    string
	prefix                 string
	creds                  string
	nkey                   string
	tlsCA, tlsCert, tlsKey string
}

// shown is the URL as logs and messages show it: without a password.
func (f *natsFlags) shown() string { return redactURLs(f.url) }

// redactURLs hides the passwords of a comma-separated list of URLs.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

func addNATSFlags(fs *flag.FlagSet, env *Env) *natsFlags {
	f := &natsFlags{}
	def := env.Getenv("NATS_URL")
	if def == "" {
		def = "nats://127.0.0.1:4222"
	}
	fs.StringVar(&f.url, "nats", def, "NATS server URL (default $NATS_URL, then nats://127.0.0.1:4222)")
	fs.StringVar(&f.prefix, "prefix", "lovia", "subject prefix")
	fs.StringVar(&f.creds, "creds", env.Getenv("NATS_CREDS"), "NATS user credentials file (JWT and nkey seed; default $NATS_CREDS)")
	fs.StringVar(&f.nkey, "nkey", env.Getenv("NATS_NKEY"), "NATS nkey seed file (default $NATS_NKEY)")
	fs.StringVar(&f.tlsCA, "tls-ca", env.Getenv("NATS_CA"), "CA certificate file that signed the NATS servers' certificates (default $NATS_CA)")
	fs.StringVar(&f.tlsCert, "tls-cert", env.Getenv("NATS_CERT"), "client certificate file for NATS TLS (default $NATS_CERT; with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", env.Getenv("NATS_KEY"), "client key file for NATS TLS (default $NATS_KEY; with --tls-cert)")
	return f
}

func (f *natsFlags) connect(name string) (*nats.Conn, error) {
	opts, err := f.options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(f.url, opts...)
	if err != nil {
		return nil, f.connectError(err)
	}
	return nc, nil
}

// longLived names the connections of processes that run until stopped:
// they reconnect for as long as they run.
func longLived(name string) bool {
	return name == "worker" || name == "gateway" || name == "tool services"
}

// options are the connection options of a command's connection.
func (f *natsFlags) options(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name("lovia " + name), nats.Timeout(5 * time.Second)}
	if longLived(name) {
		// Long-lived processes keep reconnecting for as long as they run —
		// also through refused logins, which a credential rotation causes
		// for a moment (the library gives up after two in a row) — and
		// notice a server that stopped answering (a paused or partitioned
		// node) within about 15s instead of the library's 4 minutes, so
		// they move to another node of the cluster.
		opts = append(opts, nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort(),
			nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(3))
	}
	if f.creds != "" && f.nkey != "" {
		return nil, fmt.Errorf("--creds and --nkey are two ways to log in to NATS: give one")
	}
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.tlsCA != "" {
		opts = append(opts, nats.RootCAs(f.tlsCA))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together: give both (the client certificate and its key)")
	}
	if f.tlsCert != "" {
		opts = append(opts, nats.ClientCert(f.tlsCert, f.tlsKey))
	}
	if f.nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey %s: %w (the file holds an nkey seed, SU…, as nsc or nk -gen user writes it)", f.nkey, err)
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

// connectError is a failed connect's error, with what to do next.
func (f *natsFlags) connectError(err error) error {
	hint := "start one with `lovia dev`, or pass --nats / set NATS_URL"
	if refusedLogin(err) {
		hint = "the server refused these credentials: check --creds, --nkey or the user:password in --nats (see docs/nats.md#permissions)"
	}
	return fmt.Errorf("cannot connect to NATS at %s: %w (%s)", f.shown(), err, hint)
}

// refusedLogin reports whether err is the server refusing a login.
func refusedLogin(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization")
}

func (f *natsFlags) client(name string) (*client.Client, *nats.Conn, error) {
	nc, err := f.connect(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(nc, client.Options{Prefix: f.prefix})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc, nil
}

func fail(w io.Writer, err error) int {
	msg := err.Error()
	if !strings.HasPrefix(msg, "lovia:") {
		msg = "lovia: " + msg
	}
	fmt.Fprintln(w, msg)
	return ExitFailure
}

// requestCtx bounds a one-shot request.
func requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 15*time.Second)
}
