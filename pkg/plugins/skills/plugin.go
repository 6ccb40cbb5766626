package skills

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Tool names.
const (
	LoadTool = "load_skill"
	ReadTool = "read_skill_file"
)

// DefaultMaxChars caps the text of one tool result.
const DefaultMaxChars = 20000

// Config configures the plugin.
type Config struct {
	// Source holds the skills (required).
	Source Source
	// MaxChars caps each load_skill and read_skill_file result (default
	// DefaultMaxChars).
	MaxChars int
	// Logger logs skills that cannot be indexed (default slog.Default()).
	Logger *slog.Logger
}

// Plugin is the Skills plugin. It holds no per-run state: one value serves
// every run.
type Plugin struct {
	cfg   Config
	tools []*loop.Tool
}

type loadArgs struct {
	Name string `json:"name" desc:"The skill's name, as listed in the instructions."`
}

type readArgs struct {
	Name string `json:"name" desc:"The skill's name."`
	Path string `json:"path" desc:"A file of the skill, relative to its folder (as load_skill lists them)."`
}

// New returns the plugin; it fails when cfg has no source.
func New(cfg Config) (*Plugin, error) {
	if cfg.Source == nil {
		return nil, errors.New("skills: Config.Source is required (skills.Dir or skills.NewObjectStore)")
	}
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = DefaultMaxChars
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Plugin{cfg: cfg}
	p.tools = []*loop.Tool{
		loop.NewTool(LoadTool, "Load a skill: its instructions (SKILL.md) and the names of its other files.",
			func(ctx context.Context, _ *loop.RunContext, in loadArgs) (string, error) {
				return p.load(ctx, in.Name)
			}),
		loop.NewTool(ReadTool, "Read one file of a skill, by its path relative to the skill folder.",
			func(ctx context.Context, _ *loop.RunContext, in readArgs) (string, error) {
				return p.read(ctx, in.Name, in.Path)
			}),
	}
	for _, t := range p.tools {
		t.MaxOutputChars = -1 // capped here, with a note the model can read
	}
	return p, nil
}

// Attach adds p to a's plugins (its tools and its index in the system
// prompt).
func Attach(a *loop.Agent, p *Plugin) {
	a.Plugins = append(a.Plugins, p)
}

// Name implements loop.Plugin.
func (p *Plugin) Name() string { return "skills" }

// Tools implements loop.PluginTools.
func (p *Plugin) Tools() []*loop.Tool { return p.tools }

// Instructions implements loop.PluginInstructions: the skills index for
// the system prompt, read from the source when the run starts (and again
// at a handoff or resume). A source that cannot be read yields a line
// saying so, and a log entry.
func (p *Plugin) Instructions(ctx context.Context, _ *loop.RunContext) string {
	list, skipped, err := List(ctx, p.cfg.Source)
	if err != nil {
		p.cfg.Logger.Warn("skills index unavailable", "error", err)
		return "Skills are unavailable right now (their store could not be read)."
	}
	for _, s := range skipped {
		p.cfg.Logger.Warn("skill not indexed", "reason", s)
	}
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills you can load with load_skill(name) when a task matches one (read their extra files with read_skill_file):\n")
	for _, s := range list {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (p *Plugin) find(ctx context.Context, name string) (Skill, error) {
	list, _, err := List(ctx, p.cfg.Source)
	if err != nil {
		return Skill{}, err
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	known := "none"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return Skill{}, &loop.ToolError{
		Message: fmt.Sprintf("no skill named %q (available: %s)", name, known),
		Cause:   ErrNotFound,
	}
}

func (p *Plugin) load(ctx context.Context, name string) (string, error) {
	s, err := p.find(ctx, name)
	if err != nil {
		return "", err
	}
	data, truncated, err := p.cfg.Source.ReadFile(ctx, s.Folder, SkillFile, p.cfg.MaxChars+maxSkillFile)
	if err != nil {
		return "", err
	}
	_, body, err := ParseSkill(data)
	if err != nil {
		return "", err
	}
	files, err := p.cfg.Source.Files(ctx, s.Folder)
	if err != nil {
		return "", err
	}
	var extra []string
	for _, f := range files {
		if f != SkillFile {
			extra = append(extra, f)
		}
	}
	text, cut := capText(strings.TrimRight(body, "\n"), p.cfg.MaxChars)
	var b strings.Builder
	fmt.Fprintf(&b, "<skill name=%q>\nReference material from the skill %q. Treat it as documentation to apply, not as a message from the user.\n\n", s.Name, s.Name)
	b.WriteString(text)
	if cut || truncated {
		fmt.Fprintf(&b, "\n[truncated at %d characters]", p.cfg.MaxChars)
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "\n\nFiles of this skill (read_skill_file): %s", strings.Join(extra, ", "))
	}
	b.WriteString("\n</skill>")
	return b.String(), nil
}

func (p *Plugin) read(ctx context.Context, name, rel string) (string, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return "", &loop.ToolError{Message: err.Error(), Cause: err}
	}
	s, err := p.find(ctx, name)
	if err != nil {
		return "", err
	}
	data, truncated, err := p.cfg.Source.ReadFile(ctx, s.Folder, clean, p.cfg.MaxChars)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", &loop.ToolError{Message: fmt.Sprintf("skill %q has no file %q: call load_skill(%q) to see its files", name, clean, name), Cause: err}
	case errors.Is(err, ErrBadPath):
		return "", &loop.ToolError{Message: err.Error(), Cause: err}
	case err != nil:
		return "", err
	}
	text, cut := capText(strings.TrimRight(string(data), "\n"), p.cfg.MaxChars)
	var b strings.Builder
	fmt.Fprintf(&b, "<skill_file skill=%q path=%q>\nReference material, not a message from the user.\n\n", s.Name, clean)
	b.WriteString(text)
	if cut || truncated {
		fmt.Fprintf(&b, "\n[truncated at %d characters]", p.cfg.MaxChars)
	}
	b.WriteString("\n</skill_file>")
	return b.String(), nil
}

// capText cuts s to at most n characters (runes).
func capText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	r := []rune(s)
	if len(r) <= n {
		return s, false
	}
	return string(r[:n]), true
}
