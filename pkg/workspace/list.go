package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
)

// DirEntry is one item of a folder listing: a file, or a folder (which
// exists while a file is under it).
type DirEntry struct {
	// Name is the item's name within the folder.
	Name string `json:"name"`
	// Dir marks a folder.
	Dir bool `json:"dir,omitempty"`
	// Size is a file's size, or the sum of a folder's files.
	Size int64 `json:"size"`
	// Files is a folder's file count (1 for a file).
	Files int `json:"files"`
}

// List returns the files and folders directly in folder dir ("" or "."
// is the root), sorted by name; keep, when not nil, leaves out the files
// it returns false for. A folder no file is under is ErrNotFound.
func (t *Tree) List(ctx context.Context, dir string, keep func(path string) bool) ([]DirEntry, error) {
	const op = "list"
	clean, err := Clean(op, dir, true)
	if err != nil {
		return nil, err
	}
	entries, err := t.Files(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := fileAt(entries, clean); ok {
		return nil, refuse(op, clean, ErrNotFound, fmt.Sprintf("%s is a file, not a folder", clean), "read_file reads it")
	}
	items := map[string]*DirEntry{}
	for _, e := range entries {
		if !under(e.Path, clean) || (keep != nil && !keep(e.Path)) {
			continue
		}
		rest := strings.TrimPrefix(e.Path, clean)
		rest = strings.TrimPrefix(rest, "/")
		name, _, isDir := strings.Cut(rest, "/")
		it := items[name]
		if it == nil {
			it = &DirEntry{Name: name, Dir: isDir}
			items[name] = it
		}
		it.Size += e.Size
		it.Files++
	}
	if len(items) == 0 && clean != "" {
		return nil, refuse(op, clean, ErrNotFound, fmt.Sprintf("no folder %s", clean), "list_dir with path . lists the root")
	}
	out := make([]DirEntry, 0, len(items))
	for _, it := range items {
		out = append(out, *it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func fileAt(entries []Entry, p string) (Entry, bool) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Path >= p })
	if p != "" && i < len(entries) && entries[i].Path == p {
		return entries[i], true
	}
	return Entry{}, false
}

// Match is one line grep found.
type Match struct {
	Path string `json:"path"`
	// Line is the line's number, from 1.
	Line int `json:"line"`
	// Text is the line, cut to MaxMatchLineChars.
	Text string `json:"text"`
}

// Grep limits.
const (
	// DefaultMaxMatches caps the matches of one grep.
	DefaultMaxMatches = 100
	// MaxMatchLineChars cuts each matched line.
	MaxMatchLineChars = 300
)

// Grep returns the lines matching re in the text files under dir (a
// folder or one file; "" is the whole tree), in path and line order, at
// most max (≤0: DefaultMaxMatches); truncated reports that there were
// more. Binary files (holding a NUL byte or invalid UTF-8) are skipped;
// keep, when not nil, leaves out the files it returns false for.
func (t *Tree) Grep(ctx context.Context, re *regexp.Regexp, dir string, max int, keep func(path string) bool) (matches []Match, truncated bool, err error) {
	const op = "grep"
	clean, err := Clean(op, dir, true)
	if err != nil {
		return nil, false, err
	}
	if max <= 0 {
		max = DefaultMaxMatches
	}
	entries, err := t.Files(ctx)
	if err != nil {
		return nil, false, err
	}
	one, isFile := fileAt(entries, clean)
	if isFile {
		entries = []Entry{one}
	}
	searched := 0
	for _, e := range entries {
		if (!isFile && !under(e.Path, clean)) || (keep != nil && !keep(e.Path)) {
			continue
		}
		searched++
		b, err := t.content(ctx, e)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			continue // replaced or deleted since the listing
		}
		if err != nil {
			return nil, false, err
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if len(matches) == max {
				return matches, true, nil
			}
			matches = append(matches, Match{Path: e.Path, Line: i + 1, Text: cutLine(line)})
		}
	}
	if searched == 0 && clean != "" {
		return nil, false, refuse(op, clean, ErrNotFound, fmt.Sprintf("no file or folder %s", clean), "grep with path . searches the whole workspace")
	}
	return matches, false, nil
}

func cutLine(s string) string {
	s = strings.TrimSuffix(s, "\r")
	if len(s) <= MaxMatchLineChars {
		return s
	}
	cut := MaxMatchLineChars
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
