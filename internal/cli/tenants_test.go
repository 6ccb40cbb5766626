package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadTenants: a tenants file takes tokens and the NATS password from
// the environment, and every mistake names the tenant and what to do.
func TestReadTenants(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "tenants.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	env := &Env{Getenv: getenv(map[string]string{"A_TOKENS": "t1, t2,", "B_PW": "secret"})}
	got, err := readTenants(env, write(`
tenants:
  - name: a
    tokens_env: A_TOKENS
    nats: {creds: /a.creds, prefix: acme}
  - name: b
    tokens: [t3]
    nats: {url: "nats://n1:4222,nats://n2:4222", user: b-gw, password_env: B_PW}
`))
	require.NoError(t, err)
	require.Equal(t, []string{"t1", "t2"}, got[0].Tokens)
	base := &natsFlags{url: "nats://base:4222", prefix: "lovia", nkey: "/gw.nk"}
	fa, err := got[0].flags(env, base)
	require.NoError(t, err)
	require.Equal(t, natsFlags{url: "nats://base:4222", prefix: "acme", creds: "/a.creds"}, *fa, "the tenant's login replaces the gateway's nkey")
	fb, err := got[1].flags(env, base)
	require.NoError(t, err)
	require.Equal(t, "nats://b-gw:secret@n1:4222,nats://b-gw:secret@n2:4222", fb.url)
	require.Equal(t, "lovia", fb.prefix)

	for name, c := range map[string]struct{ body, want string }{
		"unknown key":    {"tenants:\n  - name: a\n    token: [x]\n", "field token not found"},
		"no tenants":     {"tenants: []\n", "lists no tenants"},
		"empty env":      {"tenants:\n  - name: a\n    tokens_env: NOPE\n", "reads its tokens from $NOPE, which is empty"},
		"no tokens":      {"tenants:\n  - name: a\n", `tenant "a" has no tokens`},
		"user alone":     {"tenants:\n  - name: a\n    tokens: [x]\n    nats: {user: u}\n", "nats.user and nats.password_env go together"},
		"empty password": {"tenants:\n  - name: a\n    tokens: [x]\n    nats: {user: u, password_env: NOPE}\n", "NATS password from $NOPE"},
		"empty token":    {"tenants:\n  - name: a\n    tokens: [x, \" \"]\n", `tenant "a" has an empty token in tokens: remove it`},
		"twice":          {"tenants:\n  - name: a\n    tokens: [x]\n  - name: a\n    tokens: [y]\n", `tenant "a" is listed twice`},
		"bad name":       {"tenants:\n  - name: team a\n    tokens: [x]\n", `tenants[0]: name "team a": give each tenant a name of letters`},
		"no name":        {"tenants:\n  - tokens: [x]\n", `tenants[0]: name "": give each tenant a name`},
		"shared token":   {"tenants:\n  - name: a\n    tokens: [x, s3cret]\n  - name: b\n    tokens: [s3cret]\n", `tenant "b" has a token that tenant "a" has too`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readTenants(env, write(c.body))
			require.ErrorContains(t, err, c.want)
			require.NotContains(t, err.Error(), "s3cret", "an error names where a token is, never the token")
		})
	}

	t.Run("agents relative to the file", func(t *testing.T) {
		p := write("tenants:\n  - name: a\n    tokens: [x]\n    agents: a/agents.yaml\n  - name: b\n    tokens: [y]\n    agents: /etc/b.yaml\n")
		got, err := readTenants(env, p)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(filepath.Dir(p), "a", "agents.yaml"), got[0].Agents)
		require.Equal(t, "/etc/b.yaml", got[1].Agents)
	})

	// Two tenants that log in the same way reach one fleet: refused.
	t.Run("one login for two tenants", func(t *testing.T) {
		got, err := readTenants(env, write("tenants:\n  - name: a\n    tokens: [x]\n  - name: b\n    tokens: [y]\n    nats: {prefix: other}\n  - name: c\n    tokens: [z]\n"))
		require.NoError(t, err)
		var flags []*natsFlags
		for i := range got {
			f, err := got[i].flags(env, base)
			require.NoError(t, err)
			flags = append(flags, f)
		}
		require.ErrorContains(t, checkLogins(got, flags), `tenants "a" and "c" log in to NATS the same way`)
		require.NoError(t, checkLogins(got[:2], flags[:2]), "another prefix is another fleet")
	})
}
