package docs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	tableCommandRE = regexp.MustCompile("`(lovia [^`]+)`")
	commandWordRE  = regexp.MustCompile(`^[a-z][a-z-]*$`)
	docFlagRE      = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
)

// TestCommandFlags checks the lovia commands the docs show against the
// binary: in README.md and docs/*.md, every `lovia …` code span (the
// README's command table's rows among them) and every line of a fenced
// block that starts with lovia — illustrative ones included. Each command
// it names with flags answers -h, and every flag given is one that
// command's help lists.
func TestCommandFlags(t *testing.T) {
	t.Parallel()
	type shown struct{ where, line string }
	var lines []shown
	for _, f := range documented(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		fenced := false
		for n, l := range strings.Split(string(data), "\n") {
			where := fmt.Sprintf("%s:%d", f, n+1)
			if fenceRE.MatchString(l) {
				fenced = !fenced
				continue
			}
			if fenced {
				if c := strings.TrimPrefix(strings.TrimSpace(l), "bin/"); strings.HasPrefix(c, "lovia ") {
					c, _, _ = strings.Cut(c, " #")
					lines = append(lines, shown{where, c})
				}
				continue
			}
			for _, m := range tableCommandRE.FindAllStringSubmatch(l, -1) {
				lines = append(lines, shown{where, m[1]})
			}
		}
	}
	helps := map[string]string{}
	help := func(words []string) string {
		key := strings.Join(words, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, loviaBin, append(words, "-h")...).CombinedOutput()
		helps[key] = string(out)
		return helps[key]
	}
	var bad []string
	commands := 0
	for _, sh := range lines {
		line := strings.ReplaceAll(sh.line, `\|`, "|")
		var words []string
		for _, tok := range strings.Fields(line)[1:] {
			if !commandWordRE.MatchString(tok) || len(words) == 2 {
				break
			}
			words = append(words, tok)
		}
		commands++
		if len(words) == 0 { // lovia --version
			out, err := exec.Command(loviaBin, strings.Fields(line)[1:]...).CombinedOutput()
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: `%s`: %v\n%s", sh.where, line, err, out))
			}
			continue
		}
		flags := docFlagRE.FindAllStringSubmatch(line, -1)
		if len(flags) == 0 {
			continue
		}
		h := help(words)
		if !strings.Contains(strings.ToLower(h), "usage") {
			bad = append(bad, fmt.Sprintf("%s: `%s`: `lovia %s -h` prints no usage:\n%s", sh.where, line, strings.Join(words, " "), h))
			continue
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^\s*--?` + regexp.QuoteMeta(f[1]) + `\b`).MatchString(h) {
				bad = append(bad, fmt.Sprintf("%s: `%s`: `lovia %s` has no flag --%s (its -h lists none)", sh.where, line, strings.Join(words, " "), f[1]))
			}
		}
	}
	require.Greater(t, commands, 30, "the patterns found too few lovia commands in the docs")
	if len(bad) > 0 {
		t.Fatalf("the docs and the binary disagree:\n%s", strings.Join(bad, "\n"))
	}
}
