package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writePluginFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// runCLI runs one lovia command against env and returns its exit code,
// stdout and stderr.
func runCLI(t *testing.T, env func(string) string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, env)
	return code, out.String(), errb.String()
}

// TestDevSkillsFromTheObjectStore: `lovia skills push` fills the fleet's
// object store, `lovia skills ls` lists it, a run of `lovia dev`'s worker
// loads the skill from it, and a pushed change is what the next run loads.
func TestDevSkillsFromTheObjectStore(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents.yaml")
	writePluginFile(t, agents, `
agents:
  - name: skilled
    model: scripted
    plugins:
      skills: {}
    script:
      - call: {name: load_skill, args: {name: release}, id: k1}
      - text: loaded
`)
	skillsDir := filepath.Join(dir, "skills")
	writePluginFile(t, filepath.Join(skillsDir, "release", "SKILL.md"), "---\nname: release\ndescription: How to cut a release.\n---\nTag, then build.\n")
	url := startDev(t, "--agents", agents, "--workers", "1")
	env := getenv(map[string]string{"NATS_URL": url})

	code, out, errs := runCLI(t, env, "skills", "ls")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "no skills in lovia_skills: push some with `lovia skills push DIR`\n", out)

	code, out, errs = runCLI(t, env, "skills", "push", skillsDir)
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "pushed 1 skill(s) to lovia_skills: release (1 files written, 0 removed)\n", out)
	code, out, errs = runCLI(t, env, "skills", "ls")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "release\tHow to cut a release.\n", out)

	code, out, errs = runCLI(t, env, "run", "--agent", "skilled", "--json", "go")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `Tag, then build.`)

	writePluginFile(t, filepath.Join(skillsDir, "release", "SKILL.md"), "---\nname: release\ndescription: How to cut a release.\n---\nBuild, then tag.\n")
	code, _, errs = runCLI(t, env, "skills", "push", filepath.Join(skillsDir, "release"))
	require.Equal(t, ExitOK, code, errs)
	code, out, errs = runCLI(t, env, "run", "--agent", "skilled", "--json", "go")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `Build, then tag.`)
	require.NotContains(t, out, `Tag, then build.`)
}

func TestSkillsUsage(t *testing.T) {
	t.Parallel()
	env := getenv(map[string]string{"NATS_URL": "nats://127.0.0.1:1"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"skills"}, "say push DIR or ls"},
		{[]string{"skills", "pull"}, `unknown skills command "pull"`},
		{[]string{"skills", "push"}, "push takes one DIR"},
		{[]string{"skills", "ls", "x"}, "ls takes no arguments"},
		{[]string{"skills", "push", "d", "--replicas", "0"}, "--replicas 0: give 1 or more"},
	} {
		code, _, errs := runCLI(t, env, tc.args...)
		require.Equal(t, ExitUsage, code, tc.args)
		require.Contains(t, errs, tc.want, tc.args)
	}
	code, _, errs := runCLI(t, env, "skills", "ls")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "cannot connect to NATS")
}

// TestDevMemoryShow: a run of `lovia dev` remembers a note in the fleet's
// bucket; `lovia memory show` prints it and the run's archive.
func TestDevMemoryShow(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents.yaml")
	writePluginFile(t, agents, `
agents:
  - name: keeper
    model: scripted
    plugins:
      memory: {}
    script:
      - call: {name: remember, args: {text: Deploys on Fridays are banned.}, id: m1}
      - text: Noted.
`)
	url := startDev(t, "--agents", agents, "--workers", "1")
	env := getenv(map[string]string{"NATS_URL": url})

	code, out, errs := runCLI(t, env, "memory", "show", "session:team")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "no memories for session:team\n", out)

	code, _, errs = runCLI(t, env, "run", "--agent", "keeper", "--session", "team", "remember this")
	require.Equal(t, ExitOK, code, errs)
	code, out, errs = runCLI(t, env, "memory", "show", "session:team")
	require.Equal(t, ExitOK, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Regexp(t, `^note\t[0-9a-f]{12}\t\S+\tDeploys on Fridays are banned\.$`, lines[0])
	require.Regexp(t, `^archive\t\S+\t\S+\tasked "remember this", answered "Noted\."$`, lines[1])

	code, out, errs = runCLI(t, env, "memory", "show", "session:team", "--json")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `"text": "Deploys on Fridays are banned."`)
}

func TestMemoryUsage(t *testing.T) {
	t.Parallel()
	env := getenv(map[string]string{"NATS_URL": "nats://127.0.0.1:1"})
	for _, args := range [][]string{{"memory"}, {"memory", "ls"}, {"memory", "show", "team"}, {"memory", "show", "group:x"}, {"memory", "show", "user:"}} {
		code, _, errs := runCLI(t, env, args...)
		require.Equal(t, ExitUsage, code, args)
		require.Contains(t, errs, "session:ID or user:ID", args)
	}
}
