package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Tool names.
const (
	RememberTool = "remember"
	ForgetTool   = "forget"
	RecallTool   = "recall"
)

// ScopeKind says what a memory belongs to.
type ScopeKind string

// Scope kinds.
const (
	BySession ScopeKind = "session"
	ByUser    ScopeKind = "user"
)

// Defaults.
const (
	DefaultMaxNotes = 20
	DefaultUserKey  = "user_id"
	// maxText caps a note and each archived text.
	maxText = 2000
	// maxRecall caps the records recall returns.
	maxRecall = 20
)

// Config configures the plugin.
type Config struct {
	// Store keeps the memories (required).
	Store Store
	// Scope is BySession (default) or ByUser.
	Scope ScopeKind
	// UserKey is the run metadata key of the user id (default "user_id").
	UserKey string
	// MaxNotes caps the notes written into the system prompt (default 20),
	// and the notes a dream keeps.
	MaxNotes int
	// DreamEvery makes every DreamEvery-th completed run of a scope
	// rewrite the scope's notes with a model at its end (a "dream"):
	// duplicates merged, contradicted notes dropped, at most MaxNotes
	// kept (see the package doc, Curation). 0, the default: never.
	DreamEvery int
	// DreamModel is the model that rewrites (default: the run's agent's
	// Provider).
	DreamModel loop.Provider
	// DreamTimeout bounds a dream (default DefaultDreamTimeout).
	DreamTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger logs failed reads and archive writes (default slog.Default()).
	Logger *slog.Logger
}

// Plugin is the Memory plugin. It holds no per-run state.
type Plugin struct {
	cfg   Config
	tools []*loop.Tool
	hooks *loop.Hooks
}

type rememberArgs struct {
	Text string `json:"text" desc:"The fact to keep, self-contained (it is read later without this conversation)." jsonschema:"minLength=1"`
}

type forgetArgs struct {
	ID string `json:"id" desc:"The id of the note, as shown in your notes or by recall."`
}

type recallArgs struct {
	Query string `json:"query,omitempty" desc:"Words to look for (all must appear); empty lists the newest memories."`
}

// New returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Store == nil {
		return nil, errors.New("memory: Config.Store is required (memory.NewKV or memory.NewMemoryStore)")
	}
	switch cfg.Scope {
	case "":
		cfg.Scope = BySession
	case BySession, ByUser:
	default:
		return nil, fmt.Errorf("memory: scope %q: use session or user", cfg.Scope)
	}
	if cfg.UserKey == "" {
		cfg.UserKey = DefaultUserKey
	}
	if cfg.MaxNotes <= 0 {
		cfg.MaxNotes = DefaultMaxNotes
	}
	if cfg.DreamEvery < 0 {
		return nil, fmt.Errorf("memory: Config.DreamEvery %d is negative (0 turns dreams off)", cfg.DreamEvery)
	}
	if cfg.DreamTimeout <= 0 {
		cfg.DreamTimeout = DefaultDreamTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Plugin{cfg: cfg}
	p.tools = []*loop.Tool{
		loop.NewTool(RememberTool, "Keep a note for later conversations (a preference, a fact, a decision).", p.remember),
		loop.NewTool(ForgetTool, "Delete one of your notes by id (when it is wrong or no longer true).", p.forget),
		loop.NewTool(RecallTool, "Search your notes and the archives of earlier runs.", p.recall),
	}
	p.hooks = loop.NewHooks().On(p.archive, loop.EventRunCompleted)
	return p, nil
}

// Attach adds p to a's plugins (its tools, its hot notes in the system
// prompt and its run-end curation).
func Attach(a *loop.Agent, p *Plugin) {
	a.Plugins = append(a.Plugins, p)
}

// Name implements loop.Plugin.
func (p *Plugin) Name() string { return "memory" }

// Tools implements loop.PluginTools.
func (p *Plugin) Tools() []*loop.Tool { return p.tools }

// Hooks implements loop.PluginHooks: the run-end archive.
func (p *Plugin) Hooks() *loop.Hooks { return p.hooks }

// ScopeOf returns the scope of a run ("session:<id>" or "user:<id>"), or
// an error saying how to give the run one.
func (p *Plugin) ScopeOf(rc *loop.RunContext) (string, error) {
	if p.cfg.Scope == ByUser {
		if id, _ := rc.Metadata[p.cfg.UserKey].(string); id != "" {
			return "user:" + id, nil
		}
		return "", fmt.Errorf("memory is kept per user and this run has no user id: submit it with metadata {%q: \"<user id>\"}", p.cfg.UserKey)
	}
	if rc.SessionID != "" {
		return "session:" + rc.SessionID, nil
	}
	return "", errors.New("memory is kept per session and this run has none: submit it with a session_id")
}

func (p *Plugin) scope(rc *loop.RunContext) (string, error) {
	s, err := p.ScopeOf(rc)
	if err != nil {
		return "", &loop.ToolError{Message: err.Error()}
	}
	return s, nil
}

// Instructions implements loop.PluginInstructions: the scope's newest
// notes (the hot notes) for the system prompt, read from the store when
// the run starts or resumes.
func (p *Plugin) Instructions(ctx context.Context, rc *loop.RunContext) string {
	scope, err := p.ScopeOf(rc)
	if err != nil {
		return ""
	}
	notes, err := p.cfg.Store.List(ctx, scope, KindNote)
	if err != nil {
		p.cfg.Logger.Warn("memory notes unavailable", "scope", scope, "error", err)
		return "Your memory could not be read for this run; do not assume you remember nothing."
	}
	if len(notes) > p.cfg.MaxNotes {
		notes = notes[len(notes)-p.cfg.MaxNotes:]
	}
	var b strings.Builder
	b.WriteString("You have a memory: remember(text) keeps a note, forget(id) deletes one, recall(query) searches notes and earlier runs.")
	if len(notes) > 0 {
		b.WriteString("\nYour notes, oldest first:")
		for _, n := range notes {
			fmt.Fprintf(&b, "\n- [%s] %s", n.ID, n.Text)
		}
	}
	return b.String()
}

// NoteID is the id of a note with text in its scope, whichever run
// writes it: texts that say the same (see remember) have one id, so
// concurrent runs of one user that remember the same fact write one note,
// and a call replayed or re-executed after a resume writes no second.
func NoteID(text string) string {
	sum := sha256.Sum256([]byte(normNote(text)))
	return hex.EncodeToString(sum[:6])
}

func (p *Plugin) remember(ctx context.Context, rc *loop.RunContext, in rememberArgs) (string, error) {
	scope, err := p.scope(rc)
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(in.Text)
	if text == "" {
		return "", &loop.ToolError{Message: "remember needs a non-empty text"}
	}
	if len([]rune(text)) > maxText {
		return "", &loop.ToolError{Message: fmt.Sprintf("a note is at most %d characters (this one has %d): keep the essential fact", maxText, len([]rune(text)))}
	}
	// A note that says the same (case, spacing and a final period aside)
	// is not written twice; an unreadable store only skips the check.
	if notes, err := p.cfg.Store.List(ctx, scope, KindNote); err == nil {
		for _, n := range notes {
			if sameNote(n.Text, text) {
				return fmt.Sprintf("Already remembered (id %s).", n.ID), nil
			}
		}
	}
	// Of concurrent runs remembering the same (the list above showed
	// none of them the others' note), one creates it.
	r := Record{ID: NoteID(text), Kind: KindNote, Text: text, RunID: rc.RunID, CreatedAt: p.cfg.Now().UTC()}
	if err := p.cfg.Store.Create(ctx, scope, r); errors.Is(err, ErrExists) {
		return fmt.Sprintf("Already remembered (id %s).", r.ID), nil
	} else if err != nil {
		return "", err
	}
	return fmt.Sprintf("Remembered (id %s).", r.ID), nil
}

// sameNote reports whether two note texts say the same: equal once
// lower-cased, with runs of spaces collapsed and a final period dropped.
func sameNote(a, b string) bool { return normNote(a) == normNote(b) }

func normNote(s string) string {
	return strings.TrimSuffix(strings.Join(strings.Fields(strings.ToLower(s)), " "), ".")
}

func (p *Plugin) forget(ctx context.Context, rc *loop.RunContext, in forgetArgs) (string, error) {
	scope, err := p.scope(rc)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(in.ID)
	if id == "" || ScopeToken(id) != id {
		// Not an id a note can have (a store key could not even hold it).
		err = ErrNotFound
	} else {
		err = p.cfg.Store.Delete(ctx, scope, KindNote, id)
	}
	if errors.Is(err, ErrNotFound) {
		return "", &loop.ToolError{Message: fmt.Sprintf("no note with id %q: the ids are in your notes and in recall's output", in.ID), Cause: err}
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Forgot %s.", in.ID), nil
}

func (p *Plugin) recall(ctx context.Context, rc *loop.RunContext, in recallArgs) (string, error) {
	scope, err := p.scope(rc)
	if err != nil {
		return "", err
	}
	recs, err := p.cfg.Store.List(ctx, scope, "")
	if err != nil {
		return "", err
	}
	words := strings.Fields(strings.ToLower(in.Query))
	var hits []string
	for i := len(recs) - 1; i >= 0 && len(hits) < maxRecall; i-- {
		r := recs[i]
		if r.Kind == KindDream {
			continue
		}
		text := r.Text
		if r.Kind == KindArchive {
			text = fmt.Sprintf("run %s: asked %q, answered %q", r.RunID, r.Input, r.Output)
		}
		low := strings.ToLower(text)
		match := true
		for _, w := range words {
			if !strings.Contains(low, w) {
				match = false
				break
			}
		}
		if match {
			hits = append(hits, fmt.Sprintf("- [%s] (%s, %s) %s", r.ID, r.Kind, r.CreatedAt.Format("2006-01-02"), text))
		}
	}
	if len(hits) == 0 {
		if len(words) == 0 {
			return "Nothing remembered yet.", nil
		}
		return fmt.Sprintf("Nothing remembered matches %q.", in.Query), nil
	}
	return strings.Join(hits, "\n"), nil
}

// archive is the run-end curation: the completed run's last input and its
// output, upserted under the run id; then, every DreamEvery-th archive, a
// dream. It runs before run_completed is published, so a dream delays the
// run's end by its model call (at most DreamTimeout).
func (p *Plugin) archive(ctx context.Context, rc *loop.RunContext, ev loop.Event) {
	done, ok := ev.(*loop.RunCompleted)
	if !ok || rc.RunID == "" {
		return
	}
	scope, err := p.ScopeOf(rc)
	if err != nil {
		return
	}
	var input string
	entries := rc.Entries()
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Kind == loop.KindInput && e.Role == loop.RoleUser {
			input = e.ContentText()
			break
		}
	}
	output := fmt.Sprint(done.Output)
	if s, ok := done.Output.(string); ok {
		output = s
	}
	r := Record{ID: rc.RunID, Kind: KindArchive, RunID: rc.RunID, Input: clip(input), Output: clip(output), CreatedAt: p.cfg.Now().UTC()}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultTimeout)
	defer cancel()
	if err := p.cfg.Store.Put(wctx, scope, r); err != nil {
		p.cfg.Logger.Warn("memory archive not written", "run_id", rc.RunID, "scope", scope, "error", err)
		return
	}
	if p.cfg.DreamEvery > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.DreamTimeout)
		defer cancel()
		p.dream(dctx, rc, scope)
	}
}

func clip(s string) string {
	r := []rune(s)
	if len(r) <= maxText {
		return s
	}
	return string(r[:maxText]) + "…"
}
