package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/registry"
)

// agentRow is one agent of lovia agents ls: defined in the registry, or
// served by live workers from their agents files, or both.
type agentRow struct {
	Name string `json:"name"`
	// Revision is the registry revision (0: not in the registry).
	Revision uint64   `json:"revision,omitempty"`
	Model    string   `json:"model"`
	Tools    []string `json:"tools"`
	// Workers counts the live workers serving it (-1: unknown, the
	// fleet registry could not be read).
	Workers int `json:"workers"`
	// Source is "registry" (defined there) or "workers" (served by live
	// workers from their agents files, not in the registry).
	Source string `json:"source"`
}

// servedBy counts the live workers serving each agent (nil when the fleet
// registry cannot be read).
func servedBy(ctx context.Context, js jetstream.JetStream, names bus.Names) map[string]int {
	counts, _ := fleetAgents(ctx, js, names)
	return counts
}

// fleetAgents counts the live workers serving each agent, with what one
// of them announced: nil maps when the fleet registry cannot be read,
// empty ones when no worker has created it yet.
func fleetAgents(ctx context.Context, js jetstream.JetStream, names bus.Names) (map[string]int, map[string]bus.AgentInfo) {
	ms, ok := fleetMembers(ctx, js, names)
	if !ok {
		return nil, nil
	}
	return agentsOf(ms)
}

// agentsOf counts the workers ms serving each agent, with what one of
// them announced.
func agentsOf(ms []fleet.Member) (map[string]int, map[string]bus.AgentInfo) {
	counts, infos := map[string]int{}, map[string]bus.AgentInfo{}
	for _, m := range ms {
		for _, a := range m.Agents {
			counts[a.Name]++
			infos[a.Name] = a
		}
	}
	return counts, infos
}

// fleetMembers reads the live workers from the fleet registry without
// creating it (an operator may not, and a bucket made here could have the
// wrong replicas): none when no worker has created it yet; ok is false
// when it cannot be read.
func fleetMembers(ctx context.Context, js jetstream.JetStream, names bus.Names) (ms []fleet.Member, ok bool) {
	fr, err := fleet.Open(ctx, js, names)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	ms, err = fr.Members(ctx)
	return ms, err == nil
}

// agentRows joins the registry's agents and the ones live workers serve.
func agentRows(es []registry.Entry, counts map[string]int, infos map[string]bus.AgentInfo) []agentRow {
	rows := map[string]*agentRow{}
	for _, e := range es {
		rows[e.Spec.Name] = &agentRow{Name: e.Spec.Name, Revision: e.Revision, Model: e.Spec.Model, Tools: nonNilStrings(e.Spec.Tools), Source: "registry", Workers: -1}
	}
	for name, info := range infos {
		if _, ok := rows[name]; !ok {
			rows[name] = &agentRow{Name: name, Model: info.Model, Tools: nonNilStrings(info.Tools), Source: "workers"}
		}
	}
	out := make([]agentRow, 0, len(rows))
	for _, r := range rows {
		if counts != nil {
			r.Workers = counts[r.Name]
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// agentsList prints the agents the fleet knows: the registry's, with
// their revision, and those live workers serve from their agents files,
// with how many live workers serve each.
func agentsList(ctx context.Context, env *Env, reg *registry.Registry, js jetstream.JetStream, names bus.Names, asJSON bool) int {
	es, err := reg.List(ctx)
	if err != nil {
		return fail(env.Stderr, err)
	}
	counts, infos := fleetAgents(ctx, js, names)
	rows := agentRows(es, counts, infos)
	if asJSON {
		printJSON(env, map[string]any{"agents": rows})
		return ExitOK
	}
	printAgentRows(env.Stdout, rows)
	return ExitOK
}

func printAgentRows(w io.Writer, rows []agentRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no agents: the registry holds none and no live worker serves any (lovia agents apply FILE, or start lovia worker --agents FILE)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tREVISION\tMODEL\tTOOLS\tWORKERS")
	for _, r := range rows {
		rev := "-"
		if r.Revision != 0 {
			rev = strconv.FormatUint(r.Revision, 10)
		}
		workers := strconv.Itoa(r.Workers)
		switch {
		case r.Workers < 0:
			workers = "?"
		case r.Workers == 0:
			workers = "0 (no live worker serves it)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Source, rev, dash(r.Model), dash(strings.Join(r.Tools, ",")), workers)
	}
	_ = tw.Flush()
}

// printHistory writes an agent's revisions, oldest first: the first in
// full, each later one as what changed since the one before.
func printHistory(w io.Writer, h []registry.Entry) {
	var prev map[string]string
	for i, e := range h {
		head := fmt.Sprintf("revision %d  %s", e.Revision, e.Created.UTC().Format(time.RFC3339))
		switch {
		case e.Deleted:
			fmt.Fprintf(w, "%s  removed\n", head)
			prev = nil
			continue
		case prev == nil && i == 0:
			fmt.Fprintf(w, "%s  created\n", head)
		case prev == nil:
			fmt.Fprintf(w, "%s  created again\n", head)
		default:
			fmt.Fprintf(w, "%s  updated\n", head)
		}
		cur := flattenSpec(e.Spec)
		for _, line := range specDiff(prev, cur) {
			fmt.Fprintln(w, "  "+line)
		}
		prev = cur
	}
}

// flattenSpec is a spec as path → value lines ("script[0].text" →
// "\"hi\""), the form a revision's diff compares.
func flattenSpec(s catalog.Spec) map[string]string {
	b, _ := json.Marshal(s)
	var v any
	_ = json.Unmarshal(b, &v)
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case nil:
		default:
			b, _ := json.Marshal(x)
			out[path] = string(b)
		}
	}
	walk("", v)
	return out
}

// specDiff lists what changed from prev to cur, by path: "- path: old"
// and "+ path: new" (every line of cur when prev is nil).
func specDiff(prev, cur map[string]string) []string {
	paths := map[string]bool{}
	for p := range prev {
		paths[p] = true
	}
	for p := range cur {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []string
	for _, p := range sorted {
		old, had := prev[p]
		now, has := cur[p]
		switch {
		case prev == nil:
			out = append(out, p+": "+now)
		case had && has && old == now:
		default:
			if had {
				out = append(out, "- "+p+": "+old)
			}
			if has {
				out = append(out, "+ "+p+": "+now)
			}
		}
	}
	if prev != nil && len(out) == 0 {
		out = append(out, "(no change)")
	}
	return out
}
