package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
)

// pluginStores opens the connection the fleet-native plugins keep their
// state through (skills object store, memory KV). Without a fleet
// connection (the gateway's listing) it returns no stores and no
// connection.
func pluginStores(fc fleetConn) (catalog.PluginStores, *nats.Conn, error) {
	if fc.connect == nil {
		return catalog.PluginStores{}, nil, nil
	}
	names, err := bus.NewNames(fc.prefix)
	if err != nil {
		return catalog.PluginStores{}, nil, err
	}
	nc, err := fc.connect("worker")
	if err != nil {
		return catalog.PluginStores{}, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return catalog.PluginStores{}, nil, err
	}
	return catalog.PluginStores{JetStream: js, Names: names}, nc, nil
}

// fleetJS connects a one-shot command to the fleet's JetStream.
func fleetJS(nf *natsFlags, name string) (jetstream.JetStream, bus.Names, *nats.Conn, error) {
	names, err := bus.NewNames(nf.prefix)
	if err != nil {
		return nil, bus.Names{}, nil, err
	}
	nc, err := nf.connect(name)
	if err != nil {
		return nil, bus.Names{}, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, bus.Names{}, nil, err
	}
	return js, names, nc, nil
}

// runSkills is `lovia skills push DIR` and `lovia skills ls`.
func runSkills(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "skills", "push DIR | ls  [--nats URL] [--prefix P] [--replicas N]")
	nf := addNATSFlags(fs, env)
	replicas := fs.Int("replicas", 1, "copies of the skills bucket when push creates it (3 on a production cluster)")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) == 0 {
		return usageErr(env, fs, "say push DIR or ls")
	}
	switch pos[0] {
	case "push":
		if len(pos) != 2 {
			return usageErr(env, fs, "push takes one DIR: a skill folder (with SKILL.md) or a folder of them")
		}
		if *replicas < 1 {
			return usageErr(env, fs, fmt.Sprintf("--replicas %d: give 1 or more", *replicas))
		}
	case "ls":
		if len(pos) != 1 {
			return usageErr(env, fs, "ls takes no arguments")
		}
	default:
		return usageErr(env, fs, fmt.Sprintf("unknown skills command %q: use push DIR or ls", pos[0]))
	}
	js, names, nc, err := fleetJS(nf, "skills")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	if pos[0] == "push" {
		rep, err := skills.Push(rctx, js, names.SkillsBucket(), pos[1], *replicas)
		if err != nil {
			return fail(env.Stderr, err)
		}
		var list []string
		for _, s := range rep.Skills {
			list = append(list, s.Name)
		}
		fmt.Fprintf(env.Stdout, "pushed %d skill(s) to %s: %s (%d files written, %d removed)\n", len(rep.Skills), names.SkillsBucket(), strings.Join(list, ", "), rep.Files, rep.Removed)
		return ExitOK
	}
	list, skipped, err := skills.List(rctx, skills.NewObjectStore(js, names.SkillsBucket()))
	if err != nil {
		return fail(env.Stderr, err)
	}
	if len(list) == 0 && len(skipped) == 0 {
		fmt.Fprintf(env.Stdout, "no skills in %s: push some with `lovia skills push DIR`\n", names.SkillsBucket())
		return ExitOK
	}
	for _, s := range list {
		fmt.Fprintf(env.Stdout, "%s\t%s\n", s.Name, s.Description)
	}
	for _, s := range skipped {
		fmt.Fprintf(env.Stderr, "lovia: skipped %s\n", s)
	}
	return ExitOK
}

// runMemory is `lovia memory show SCOPE`.
func runMemory(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "memory", "show SCOPE [--json] [--nats URL] [--prefix P]   (SCOPE: session:ID or user:ID)")
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "print the records as JSON")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 2 || pos[0] != "show" {
		return usageErr(env, fs, "say show SCOPE, where SCOPE is session:ID or user:ID")
	}
	kind, id, _ := strings.Cut(pos[1], ":")
	if (kind != string(memory.BySession) && kind != string(memory.ByUser)) || id == "" {
		return usageErr(env, fs, fmt.Sprintf("scope %q: write session:ID or user:ID", pos[1]))
	}
	js, names, nc, err := fleetJS(nf, "memory")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	recs, err := memory.NewKV(js, names.MemoryBucket(), 1).List(rctx, pos[1], "")
	if err != nil {
		return fail(env.Stderr, err)
	}
	if *asJSON {
		if recs == nil {
			recs = []memory.Record{}
		}
		printJSON(env, recs)
		return ExitOK
	}
	if len(recs) == 0 {
		fmt.Fprintf(env.Stdout, "no memories for %s\n", pos[1])
		return ExitOK
	}
	for _, r := range recs {
		text := r.Text
		if r.Kind == memory.KindArchive {
			text = fmt.Sprintf("asked %q, answered %q", r.Input, r.Output)
		}
		fmt.Fprintf(env.Stdout, "%s\t%s\t%s\t%s\n", r.Kind, r.ID, r.CreatedAt.Format(time.RFC3339), text)
	}
	return ExitOK
}
