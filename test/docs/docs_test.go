// Package docs_test keeps the project documenting itself: every example of
// README.md and docs/ runs (examples_test.go), no tracked file
// points its readers at documents outside the repository, and every
// relative link of the top-level and deploy READMEs and of docs/ leads to a
// file (and heading) that exists.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, relative to this package's directory
// (go test runs tests there).
const repoRoot = "../.."

// thisFile is skipped: it names the patterns.
const thisFile = "test/docs/docs_test.go"

// outside are references to documents users do not have (the engineers'
// shared notes, outside the repository), with what to point at instead.
var outside = []struct {
	re   *regexp.Regexp
	fix  string
	what string
}{
	{regexp.MustCompile(`PROTOCOL\.md|PROTOCOL-ADDITIONS`), "docs/protocol.md", "the wire contract"},
	{regexp.MustCompile(`(?i)NATS[- ]NOTES`), "docs/nats.md", "the NATS guide"},
	{regexp.MustCompile(`(?i)shared doc`), "docs/protocol.md or docs/nats.md", "the shared documents"},
	{regexp.MustCompile(`\.\./shared|/work/shared`), "a file in the repository", "a path outside it"},
}

// TestNoReferencesOutsideTheRepo fails on every line of a tracked file
// that sends its reader to a document outside the repository.
func TestNoReferencesOutsideTheRepo(t *testing.T) {
	t.Parallel()
	var bad []string
	for _, path := range trackedFiles(t) {
		if path == thisFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, path))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		require.NoError(t, err)
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, o := range outside {
				if m := o.re.FindString(line); m != "" {
					bad = append(bad, fmt.Sprintf("%s:%d: %q points at %s outside the repository; point at %s\n\t%s",
						path, n, m, o.what, o.fix, strings.TrimSpace(line)))
				}
			}
		}
		require.NoError(t, sc.Err(), path)
	}
	if len(bad) > 0 {
		t.Fatalf("%d lines point readers at documents they do not have:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// linkRE matches a markdown link or image: [text](target "title").
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// TestMarkdownLinks checks every relative link of README.md,
// deploy/README.md and docs/*.md: the file exists, and a #fragment names a
// heading of the markdown file it points into.
func TestMarkdownLinks(t *testing.T) {
	t.Parallel()
	files := documented(t)
	require.Greater(t, len(files), 2, "docs/ has no markdown files") // beyond README.md and deploy/README.md
	var bad []string
	links := 0
	for _, f := range files {
		for _, l := range markdownLinks(t, f) {
			links++
			if problem := checkLink(f, l.target); problem != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: link %q: %s", f, l.line, l.target, problem))
			}
		}
	}
	require.Positive(t, links, "no relative links found: the link pattern is broken")
	if len(bad) > 0 {
		t.Fatalf("%d broken links:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

type link struct {
	line   int
	target string
}

// markdownLinks returns the relative links of a markdown file, outside
// fenced code blocks and inline code.
func markdownLinks(t *testing.T, path string) []link {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err)
	var out []link
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripInlineCode(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, link{line: i + 1, target: target})
		}
	}
	return out
}

var inlineCodeRE = regexp.MustCompile("`[^`]*`")

func stripInlineCode(line string) string { return inlineCodeRE.ReplaceAllString(line, "") }

// checkLink returns what is wrong with a link from the markdown file from,
// or "".
func checkLink(from, target string) string {
	file, fragment, _ := strings.Cut(target, "#")
	path := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "absolute paths do not resolve on every viewer; use a path relative to " + from
		}
		path = filepath.ToSlash(filepath.Join(filepath.Dir(from), file))
		if strings.HasPrefix(path, "../") {
			return "it leads outside the repository"
		}
		if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
			return "no such file " + path
		}
	}
	if fragment == "" {
		return ""
	}
	if !strings.HasSuffix(path, ".md") {
		return "a #fragment into " + path + ", which is not markdown"
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		return err.Error()
	}
	anchors := headingAnchors(string(data))
	if !anchors[fragment] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", path, fragment)
	}
	return ""
}

var (
	headingRE    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	explicitIDRE = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	slugDropRE   = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// headingAnchors returns the anchors a markdown renderer (GitHub's rules)
// gives the headings of a document: lower case, punctuation but - and _
// dropped, spaces as -, repeats numbered -1, -2, …; and explicit
// <a id="…"> anchors.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range explicitIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := strings.ReplaceAll(m[1], "`", "")
		slug := strings.ReplaceAll(slugDropRE.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// trackedFiles lists the repository's tracked files (git ls-files).
func trackedFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files (the test reads the tracked files of the repository)")
	var files []string
	for f := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	require.NotEmpty(t, files)
	return files
}

// docRefRE matches a reference to a section of a document of docs/, as
// code comments and hints write them: docs/protocol.md#run-request.
var docRefRE = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)#([A-Za-z0-9_-]+)`)

// TestDocReferences checks that every docs/<file>.md#<anchor> reference in
// a tracked file names a document and a heading that exist, so a comment
// or an error hint never sends a reader to a section that was renamed.
func TestDocReferences(t *testing.T) {
	t.Parallel()
	var bad []string
	refs := 0
	for _, path := range trackedFiles(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, path))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for n, line := range strings.Split(string(data), "\n") {
			for _, m := range docRefRE.FindAllStringSubmatch(line, -1) {
				refs++
				if problem := checkLink("x.md", "docs/"+m[1]+"#"+m[2]); problem != "" {
					bad = append(bad, fmt.Sprintf("%s:%d: %s: %s", path, n+1, m[0], problem))
				}
			}
		}
	}
	require.Positive(t, refs, "no docs/<file>.md#<anchor> references found: the pattern is broken")
	if len(bad) > 0 {
		t.Fatalf("%d references to missing sections:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestHeadingAnchors pins the slug rules the link check relies on.
func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	got := headingAnchors("# Lovia Fleet wire contract\n## Streams, consumers and buckets\n## The `allow_direct` trap\n" +
		"```\n## not a heading\n```\n### Events\n### Events\n<a id=\"run-request\"></a>\n")
	require.Equal(t, map[string]bool{
		"lovia-fleet-wire-contract": true, "streams-consumers-and-buckets": true, "the-allow_direct-trap": true,
		"events": true, "events-1": true, "run-request": true,
	}, got)
}
