package mcp

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Defaults of [Config].
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 2 * time.Minute
	DefaultConnectWait    = 10 * time.Second
	DefaultMinBackoff     = 200 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
)

// Server declares one MCP server: a stdio server (Command, with Args, Env
// and Cwd) or a streamable HTTP server (URL, with Headers). Values of Env,
// Headers and URL may refer to the worker's environment as ${NAME}; the
// references are expanded at every connect, so secrets stay out of the
// agents file.
type Server struct {
	// Command starts a stdio server (looked up in PATH when it has no slash).
	Command string
	// Args are the command's arguments.
	Args []string
	// Env is the command's environment, on top of the few variables it
	// inherits from the worker's (HOME, LANG, LC_ALL, LOGNAME, PATH,
	// SHELL, TERM, TMPDIR, TZ, USER): the worker's secrets reach a server
	// only when its Env names them, e.g. GITHUB_TOKEN: ${GITHUB_TOKEN}.
	Env map[string]string
	// Cwd is the command's working directory (default: the worker's).
	Cwd string
	// URL is the endpoint of a streamable HTTP server.
	URL string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
}

// Config configures a [Manager].
type Config struct {
	// Servers are the MCP servers by name (required, at least one). A name
	// is 1-64 characters of [A-Za-z0-9_-] without "__", which separates
	// the server from the tool in tool names.
	Servers map[string]Server
	// Logger receives connection events (default: discard).
	Logger *slog.Logger
	// Getenv resolves ${NAME} references (default os.Getenv).
	Getenv func(string) string
	// ConnectTimeout bounds one connect and tool listing (default 30s).
	ConnectTimeout time.Duration
	// CallTimeout bounds a tool call whose context has no deadline
	// (default 2m).
	CallTimeout time.Duration
	// ConnectWait is how long a call waits for a server that is
	// reconnecting before it fails (default 10s).
	ConnectWait time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnects, which
	// doubles after every failed attempt (defaults 200ms and 30s).
	MinBackoff, MaxBackoff time.Duration
}

// WithDefaults returns cfg with every unset field at its default.
func (cfg Config) WithDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ConnectWait <= 0 {
		cfg.ConnectWait = DefaultConnectWait
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	return cfg
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateServerName reports whether name can name an MCP server.
func ValidateServerName(name string) error {
	if !serverNameRE.MatchString(name) || strings.Contains(name, "__") {
		return fmt.Errorf("MCP server name %q must be 1-64 characters of [A-Za-z0-9_-] without \"__\"", name)
	}
	return nil
}

// Validate reports a server declaration that cannot work.
func (s Server) Validate() error {
	switch {
	case s.Command == "" && s.URL == "":
		return errors.New("needs `command` (a stdio server) or `url` (a streamable HTTP server)")
	case s.Command != "" && s.URL != "":
		return errors.New("has both `command` and `url`: use command for a stdio server or url for an HTTP one")
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != ""):
		return errors.New("args, env and cwd are for stdio servers (command), not for url")
	case s.Command != "" && len(s.Headers) > 0:
		return errors.New("headers are for HTTP servers (url), not for command")
	}
	if s.URL != "" && !strings.Contains(s.URL, "${") && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
		return fmt.Errorf("url %q must start with http:// or https://", s.URL)
	}
	return nil
}

func (cfg *Config) validate() error {
	if len(cfg.Servers) == 0 {
		return errors.New("mcp: Config.Servers is empty: declare at least one server")
	}
	var errs []error
	for _, name := range sortedNames(cfg.Servers) {
		if err := ValidateServerName(name); err != nil {
			errs = append(errs, fmt.Errorf("mcp: %w", err))
			continue
		}
		if err := cfg.Servers[name].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcp: server %q %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var refRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${NAME} references; an unset or empty variable is an
// error naming it, so a missing secret never becomes an empty header.
func expand(s string, getenv func(string) string) (string, error) {
	var missing []string
	out := refRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := refRE.FindStringSubmatch(ref)[1]
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: %s (export it in the worker's environment)", ErrUnsetVariable, strings.Join(missing, ", "))
	}
	return out, nil
}

func expandMap(m map[string]string, getenv func(string) string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range sortedNames(m) {
		v, err := expand(m[k], getenv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}
