package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// tenantsFile is the file `lovia gateway --tenants FILE` reads: the
// tenants one gateway serves, each a fleet in its own NATS account, with
// the bearer tokens bound to it.
//
//	tenants:
//	  - name: team-a
//	    tokens_env: TEAM_A_TOKENS      # comma-separated tokens, from the environment
//	    agents: team-a/agents.yaml     # optional: validate agent names, list them (relative to this file)
//	    nats:
//	      creds: /secrets/team-a/gateway.creds
//	  - name: team-b
//	    tokens_env: TEAM_B_TOKENS
//	    nats:
//	      user: b-gateway
//	      password_env: TEAM_B_NATS_PASSWORD
type tenantsFile struct {
	Tenants []tenantEntry `yaml:"tenants"`
}

type tenantEntry struct {
	Name string `yaml:"name"`
	// Tokens are inline tokens; TokensEnv names an environment variable
	// with comma-separated tokens (keeps secrets out of the file).
	Tokens    []string `yaml:"tokens"`
	TokensEnv string   `yaml:"tokens_env"`
	// Agents is the tenant's agents file, as the gateway's --agents is
	// for one fleet: its agent names are validated on submit and listed
	// (relative paths are relative to the tenants file).
	Agents string     `yaml:"agents"`
	NATS   tenantNATS `yaml:"nats"`
}

// tenantNATS is how the gateway logs in to a tenant's account. Unset
// fields take the gateway's --nats, --prefix and --tls-* flags.
type tenantNATS struct {
	URL         string `yaml:"url"`
	Prefix      string `yaml:"prefix"`
	Creds       string `yaml:"creds"`
	NKey        string `yaml:"nkey"`
	User        string `yaml:"user"`
	PasswordEnv string `yaml:"password_env"`
}

// readTenants reads and checks a tenants file.
func readTenants(env *Env, path string) ([]tenantEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tenants: %w", err)
	}
	var f tenantsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--tenants %s: %w (the keys are tenants[].name, tokens, tokens_env, agents, nats.url, nats.prefix, nats.creds, nats.nkey, nats.user, nats.password_env)", path, err)
	}
	if len(f.Tenants) == 0 {
		return nil, fmt.Errorf("--tenants %s lists no tenants: add a `tenants:` list with a name, tokens_env and nats settings for each", path)
	}
	names := map[string]bool{}
	tokens := map[string]string{} // token → the tenant it is bound to
	for i := range f.Tenants {
		t := &f.Tenants[i]
		// gateway.Tenant's rule, checked before any connection is opened.
		if !gateway.ValidTenantName(t.Name) {
			return nil, fmt.Errorf("--tenants %s: tenants[%d]: name %q: give each tenant a name of letters, digits, '-' and '_' (at most 64)", path, i, t.Name)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("--tenants %s: tenant %q is listed twice: give each tenant one entry (with all its tokens)", path, t.Name)
		}
		names[t.Name] = true
		if t.Agents != "" && !filepath.IsAbs(t.Agents) {
			t.Agents = filepath.Join(filepath.Dir(path), t.Agents)
		}
		for j, tok := range t.Tokens {
			if t.Tokens[j] = strings.TrimSpace(tok); t.Tokens[j] == "" {
				return nil, fmt.Errorf("--tenants %s: tenant %q has an empty token in tokens: remove it", path, t.Name)
			}
		}
		if t.TokensEnv != "" {
			v := env.Getenv(t.TokensEnv)
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("--tenants %s: tenant %q reads its tokens from $%s, which is empty: set it (comma-separated tokens)", path, t.Name, t.TokensEnv)
			}
			for _, tok := range strings.Split(v, ",") {
				if tok = strings.TrimSpace(tok); tok != "" {
					t.Tokens = append(t.Tokens, tok)
				}
			}
		}
		if len(t.Tokens) == 0 {
			return nil, fmt.Errorf("--tenants %s: tenant %q has no tokens: give tokens_env (or tokens)", path, t.Name)
		}
		for _, tok := range t.Tokens {
			if other, ok := tokens[tok]; ok {
				// The token itself is a secret: name where it is, not it.
				return nil, fmt.Errorf("--tenants %s: tenant %q has a token that tenant %q has too: a token reaches one tenant only, give each its own", path, t.Name, other)
			}
			tokens[tok] = t.Name
		}
		if (t.NATS.User == "") != (t.NATS.PasswordEnv == "") {
			return nil, fmt.Errorf("--tenants %s: tenant %q: nats.user and nats.password_env go together", path, t.Name)
		}
		if t.NATS.PasswordEnv != "" && env.Getenv(t.NATS.PasswordEnv) == "" {
			return nil, fmt.Errorf("--tenants %s: tenant %q reads its NATS password from $%s, which is empty: set it", path, t.Name, t.NATS.PasswordEnv)
		}
	}
	return f.Tenants, nil
}

// checkLogins refuses two tenants whose connections would reach one
// fleet: the same URL, login and prefix (as two tenants without nats
// settings, which both take the gateway's). Each one's tokens would reach
// the other's runs.
func checkLogins(entries []tenantEntry, flags []*natsFlags) error {
	seen := map[string]string{}
	for i, f := range flags {
		key := strings.Join([]string{f.url, f.prefix, f.creds, f.nkey}, "\x00")
		if other, ok := seen[key]; ok {
			return fmt.Errorf("--tenants: tenants %q and %q log in to NATS the same way (URL, credentials and prefix): both would serve one fleet, and each one's tokens would reach the other's runs; give each tenant its own nats login (creds, nkey or user) — an account of its own — or its own nats.prefix", other, entries[i].Name)
		}
		seen[key] = entries[i].Name
	}
	return nil
}

// flags returns the NATS flags of the tenant's connection: the gateway's,
// with the tenant's settings over them.
func (t *tenantEntry) flags(env *Env, base *natsFlags) (*natsFlags, error) {
	f := *base
	if t.NATS.URL != "" {
		f.url = t.NATS.URL
	}
	if t.NATS.Prefix != "" {
		f.prefix = t.NATS.Prefix
	}
	if t.NATS.Creds != "" || t.NATS.NKey != "" || t.NATS.User != "" {
		// A tenant's own login replaces the gateway's, never mixes with it.
		f.creds, f.nkey = t.NATS.Creds, t.NATS.NKey
	}
	if t.NATS.User != "" {
		var urls []string
		for _, raw := range strings.Split(f.url, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil {
				return nil, fmt.Errorf("tenant %q: NATS URL %q: %w", t.Name, redactURLs(raw), err)
			}
			u.User = url.UserPassword(t.NATS.User, env.Getenv(t.NATS.PasswordEnv))
			urls = append(urls, u.String())
		}
		f.url = strings.Join(urls, ",")
	}
	return &f, nil
}

// startTenantGateway starts a gateway that serves every tenant of a
// tenants file, each on its own NATS connection; it returns the gateway's
// URL and a stop function that also closes the connections.
func startTenantGateway(ctx context.Context, env *Env, base *natsFlags, entries []tenantEntry, addr string, origins []string, reg gateway.MetricsRegistry, tp trace.TracerProvider, log *slog.Logger) (string, func(context.Context) error, error) {
	flags := make([]*natsFlags, len(entries))
	cats := make([]*catalog.Catalog, len(entries))
	for i := range entries {
		t := &entries[i]
		nf, err := t.flags(env, base)
		if err != nil {
			return "", nil, err
		}
		flags[i] = nf
		if t.Agents != "" {
			deps, err := buildDeps(ctx, env, &workerFlags{agents: t.Agents, workspace: "workspace", listOnly: true}, fleetConn{}, log)
			if err != nil {
				return "", nil, fmt.Errorf("tenant %q: %w", t.Name, err)
			}
			cats[i] = deps.catalog
		}
	}
	if err := checkLogins(entries, flags); err != nil {
		return "", nil, err
	}
	// Each tenant's fleet is opened once the gateway serves, in the
	// background: a tenant whose NATS is out of reach (or refuses the
	// login) is answered 503 and tried again, and the others are served.
	var mu sync.Mutex
	var conns []*nats.Conn
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
	}
	tenants := make([]gateway.Tenant, len(entries))
	for i := range entries {
		t, nf, cat := &entries[i], flags[i], cats[i]
		tlog := log.With("tenant", t.Name)
		open := func(ctx context.Context) (gateway.TenantFleet, error) {
			nc, err := nf.dial(ctx, "gateway", waitForever, tlog)
			if err != nil {
				return gateway.TenantFleet{}, err
			}
			fail := func(err error) (gateway.TenantFleet, error) {
				nc.Close()
				return gateway.TenantFleet{}, err
			}
			_, st, err := openFleet(ctx, nc, bus.ProvisionConfig{Prefix: nf.prefix, SkipWorkers: true}, store.Config{Logger: tlog})
			if err != nil {
				return fail(err)
			}
			api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Prefix: nf.prefix, Catalog: cat, Logger: tlog, AgentOptions: agentOptions(env), Tracing: tp})
			if err != nil {
				return fail(err)
			}
			c, err := client.New(nc, client.Options{Prefix: nf.prefix})
			if err != nil {
				return fail(err)
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			tlog.Info("tenant connected", "nats", nf.shown(), "prefix", nf.prefix)
			return gateway.TenantFleet{API: api, Client: c, Conn: nc}, nil
		}
		tenants[i] = gateway.Tenant{Name: t.Name, Tokens: t.Tokens, Open: open}
	}
	gw, err := gateway.New(gateway.Config{Tenants: tenants, Addr: addr, CORSOrigins: origins, Logger: log, Metrics: reg})
	if err != nil {
		return "", nil, fmt.Errorf("--tenants: %w", err)
	}
	if err := gw.Start(ctx); err != nil {
		return "", nil, fmt.Errorf("gateway on %s: %w (use --http to pick another address)", addr, err)
	}
	stop := func(ctx context.Context) error {
		defer closeAll() // after Stop, which waits for the tenants being opened
		return gw.Stop(ctx)
	}
	return shownURL(gw.Addr()), stop, nil
}

// shownURL is the gateway's URL as messages show it.
func shownURL(a string) string {
	if strings.HasPrefix(a, "[::]:") || strings.HasPrefix(a, "0.0.0.0:") {
		a = "localhost:" + a[strings.LastIndexByte(a, ':')+1:]
	}
	return "http://" + a
}
