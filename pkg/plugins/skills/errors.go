package skills

import "errors"

// Errors of the plugin and its sources.
var (
	// ErrNotFound is a skill or file that does not exist.
	ErrNotFound = errors.New("skills: not found")
	// ErrBadPath is a path that is not a relative path inside a skill
	// folder.
	ErrBadPath = errors.New("skills: path outside the skill folder")
	// ErrBadSkill is a SKILL.md without a valid front matter.
	ErrBadSkill = errors.New("skills: invalid SKILL.md")
)
