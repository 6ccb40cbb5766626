package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// DefaultDreamTimeout bounds a dream's model call and writes.
const DefaultDreamTimeout = 60 * time.Second

// dreamInstructions is the rewrite's system prompt; %d is the note cap.
const dreamInstructions = `You curate the memory of an assistant: the notes it keeps about a user or a conversation across runs.
Rewrite the notes you are given into at most %d notes:
- merge notes that say the same thing, or belong together, into one;
- drop a note a later note contradicts or replaces (the list is oldest first);
- keep every other fact; do not invent any;
- keep each note short and self-contained: it is read later without this conversation.
Answer with the notes only, one per line, each line starting with "- ", most important first.`

// dream is the periodic rewrite of a scope's hot notes, at the run end
// that completes the scope's DreamEvery-th, 2·DreamEvery-th… archived
// run. The KindDream record of that epoch, created once for the whole
// fleet, elects the run that dreams: a replayed, resumed or concurrent
// completion finds it and does nothing.
func (p *Plugin) dream(ctx context.Context, rc *loop.RunContext, scope string) {
	archives, err := p.cfg.Store.List(ctx, scope, KindArchive)
	if err != nil {
		p.cfg.Logger.Warn("memory dream skipped: archives unreadable", "scope", scope, "error", err)
		return
	}
	epoch := len(archives) / p.cfg.DreamEvery
	if epoch == 0 {
		return
	}
	marker := Record{ID: strconv.Itoa(epoch), Kind: KindDream, RunID: rc.RunID, Text: "started", CreatedAt: p.cfg.Now().UTC()}
	if err := p.cfg.Store.Create(ctx, scope, marker); err != nil {
		if !errors.Is(err, ErrExists) {
			p.cfg.Logger.Warn("memory dream skipped: marker not written", "scope", scope, "epoch", epoch, "error", err)
		}
		return
	}
	marker.Text = p.rewrite(ctx, rc, scope)
	if err := p.cfg.Store.Put(ctx, scope, marker); err != nil {
		p.cfg.Logger.Warn("memory dream outcome not recorded", "scope", scope, "epoch", epoch, "error", err)
	}
}

// rewrite replaces the scope's notes by the model's rewrite of them and
// says what it did. New notes are written before any old one is removed,
// and a removed note is kept as a KindRetired record (recall finds it):
// a failure at any point loses nothing. Any doubt about the rewrite keeps
// the notes as they are.
func (p *Plugin) rewrite(ctx context.Context, rc *loop.RunContext, scope string) string {
	fail := func(reason string, args ...any) string {
		p.cfg.Logger.Warn("memory dream failed; notes unchanged", append([]any{"scope", scope, "run_id", rc.RunID, "reason", reason}, args...)...)
		return "failed: " + reason + "; notes unchanged"
	}
	notes, err := p.cfg.Store.List(ctx, scope, KindNote)
	if err != nil {
		return fail("notes unreadable", "error", err)
	}
	if len(notes) < 2 {
		return fmt.Sprintf("nothing to rewrite (%d note)", len(notes))
	}
	model := p.cfg.DreamModel
	if model == nil {
		if a := rc.Agent(); a != nil {
			model = a.Provider
		}
	}
	if model == nil {
		return fail("no model: set Config.DreamModel")
	}
	text, err := complete(ctx, model, fmt.Sprintf(dreamInstructions, p.cfg.MaxNotes), listNotes(notes))
	if err != nil {
		return fail("model call failed", "error", err)
	}
	texts, reason := parseNotes(text, p.cfg.MaxNotes)
	if reason != "" {
		return fail(reason)
	}
	now := p.cfg.Now().UTC()
	keep := map[string]bool{}
	for i, t := range texts {
		// Distinct times keep the rewrite's order in the prompt.
		r := Record{ID: NoteID(t), Kind: KindNote, Text: t, RunID: rc.RunID, CreatedAt: now.Add(time.Duration(i) * time.Microsecond)}
		if err := p.cfg.Store.Put(ctx, scope, r); err != nil {
			return fail("note not written", "error", err)
		}
		keep[r.ID] = true
	}
	retired := 0
	for _, n := range notes {
		if keep[n.ID] {
			continue
		}
		old := n
		old.Kind = KindRetired
		if err := p.cfg.Store.Put(ctx, scope, old); err != nil {
			return fail("old note not retired", "error", err)
		}
		if err := p.cfg.Store.Delete(ctx, scope, KindNote, n.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return fail("old note not removed", "error", err)
		}
		retired++
	}
	return fmt.Sprintf("rewrote %d notes into %d (%d retired)", len(notes), len(texts), retired)
}

func listNotes(notes []Record) string {
	var b strings.Builder
	b.WriteString("The notes, oldest first:")
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s (written %s)", n.Text, n.CreatedAt.Format("2006-01-02"))
	}
	return b.String()
}

// parseNotes reads the rewrite: its "- " (or "* ") lines, without a copied
// "[id]" prefix or "(written …)" suffix. It refuses an answer with no note,
// more than max, or one over the note size.
func parseNotes(text string, max int) ([]string, string) {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "- ")
		if !ok {
			if rest, ok = strings.CutPrefix(line, "* "); !ok {
				continue
			}
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "[") {
			if i := strings.Index(rest, "] "); i > 0 {
				rest = strings.TrimSpace(rest[i+2:])
			}
		}
		if i := strings.LastIndex(rest, " (written "); i > 0 && strings.HasSuffix(rest, ")") {
			rest = strings.TrimSpace(rest[:i])
		}
		if rest == "" || seen[rest] {
			continue
		}
		if n := len([]rune(rest)); n > maxText {
			return nil, fmt.Sprintf("the rewrite has a note of %d characters, over %d", n, maxText)
		}
		seen[rest] = true
		out = append(out, rest)
	}
	switch {
	case len(out) == 0:
		return nil, "the rewrite has no notes (no line starts with \"- \")"
	case len(out) > max:
		return nil, fmt.Sprintf("the rewrite has %d notes, over max_notes %d", len(out), max)
	}
	return out, ""
}

// complete makes one model call without tools and returns its text.
func complete(ctx context.Context, model loop.Provider, system, user string) (string, error) {
	var b strings.Builder
	req := &loop.ModelRequest{Entries: []loop.Entry{loop.SystemText(system), loop.UserText(user)}}
	err := model.Stream(ctx, req, func(d loop.Delta) error {
		if d.Kind == loop.DeltaText {
			b.WriteString(d.Text)
		}
		return nil
	})
	return b.String(), err
}
