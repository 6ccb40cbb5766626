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

// TestCommandTableFlags checks the README's command table against the
// binary: each command it names answers -h, and every flag the row gives
// it is one that command's help lists.
func TestCommandTableFlags(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	section := string(data)
	start := strings.Index(section, "\n## Commands")
	require.NotEqual(t, -1, start, "README.md has no Commands section")
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
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
	for _, m := range tableCommandRE.FindAllStringSubmatch(section, -1) {
		line := strings.ReplaceAll(m[1], `\|`, "|")
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
				bad = append(bad, fmt.Sprintf("`%s`: %v\n%s", line, err, out))
			}
			continue
		}
		flags := docFlagRE.FindAllStringSubmatch(line, -1)
		if len(flags) == 0 {
			continue
		}
		h := help(words)
		if !strings.Contains(strings.ToLower(h), "usage") {
			bad = append(bad, fmt.Sprintf("`%s`: `lovia %s -h` prints no usage:\n%s", line, strings.Join(words, " "), h))
			continue
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^\s*--?` + regexp.QuoteMeta(f[1]) + `\b`).MatchString(h) {
				bad = append(bad, fmt.Sprintf("`%s`: `lovia %s` has no flag --%s (its -h lists none)", line, strings.Join(words, " "), f[1]))
			}
		}
	}
	require.Greater(t, commands, 10, "the command table's pattern found too few commands")
	if len(bad) > 0 {
		t.Fatalf("the README's command table and the binary disagree:\n%s", strings.Join(bad, "\n"))
	}
}
