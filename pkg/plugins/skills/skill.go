package skills

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SkillFile is the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// Source holds skill folders. Implementations are safe for concurrent use.
type Source interface {
	// Folders lists the skill folders (the top-level names), sorted.
	Folders(ctx context.Context) ([]string, error)
	// Files lists the files of a folder as slash-separated relative paths,
	// sorted.
	Files(ctx context.Context, folder string) ([]string, error)
	// ReadFile reads up to limit bytes of folder/rel; truncated reports
	// that the file is longer. rel has passed [CleanPath]. A missing file
	// is ErrNotFound.
	ReadFile(ctx context.Context, folder, rel string, limit int) (data []byte, truncated bool, err error)
}

// Skill is one indexed skill.
type Skill struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description" yaml:"description"`
	// Folder is the folder it lives in.
	Folder string `json:"folder" yaml:"-"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// maxSkillFile bounds the SKILL.md read for the index.
const maxSkillFile = 256 << 10

// ParseSkill splits a SKILL.md into its front matter and body.
func ParseSkill(data []byte) (Skill, string, error) {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return Skill{}, "", fmt.Errorf("%w: it must start with a front matter block (---, name: …, description: …, ---)", ErrBadSkill)
	}
	front, body, ok := strings.Cut(rest, "\n---")
	if !ok {
		return Skill{}, "", fmt.Errorf("%w: the front matter has no closing ---", ErrBadSkill)
	}
	body = strings.TrimPrefix(strings.TrimPrefix(body, "\n"), "-")
	var s Skill
	dec := yaml.NewDecoder(bytes.NewReader([]byte(front)))
	if err := dec.Decode(&s); err != nil {
		return Skill{}, "", fmt.Errorf("%w: front matter: %v", ErrBadSkill, err)
	}
	s.Name, s.Description = strings.TrimSpace(s.Name), strings.TrimSpace(s.Description)
	if !nameRE.MatchString(s.Name) {
		return Skill{}, "", fmt.Errorf("%w: name %q must be 1-64 characters of [A-Za-z0-9_.-]", ErrBadSkill, s.Name)
	}
	if s.Description == "" {
		return Skill{}, "", fmt.Errorf("%w: skill %q has no description (one line saying when to use it)", ErrBadSkill, s.Name)
	}
	return s, strings.TrimLeft(body, "\n"), nil
}

// CleanPath checks that rel is a relative, slash-separated path that stays
// inside its folder, and returns it cleaned.
func CleanPath(rel string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: %q %s; give a path relative to the skill folder, like reference.md or docs/api.md", ErrBadPath, rel, why)
	}
	switch {
	case rel == "":
		return bad("is empty")
	case strings.ContainsAny(rel, "\\\x00"):
		return bad("contains a backslash or NUL")
	case strings.HasPrefix(rel, "/"):
		return bad("is absolute")
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." {
			return bad("contains ..")
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return bad("names the folder itself")
	}
	return c, nil
}

// List reads the index of a source: every folder whose SKILL.md parses,
// sorted by folder. Folders whose SKILL.md is missing or invalid are
// reported in skipped (folder: reason).
func List(ctx context.Context, src Source) (skills []Skill, skipped []string, err error) {
	folders, err := src.Folders(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]string{}
	for _, f := range folders {
		data, _, err := src.ReadFile(ctx, f, SkillFile, maxSkillFile)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		s, _, err := ParseSkill(data)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		if prev, dup := seen[s.Name]; dup {
			skipped = append(skipped, fmt.Sprintf("%s: name %q is already used by folder %s", f, s.Name, prev))
			continue
		}
		seen[s.Name] = f
		s.Folder = f
		skills = append(skills, s)
	}
	return skills, skipped, nil
}
