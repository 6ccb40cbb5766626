// Package registry is the agents registry of Lovia Fleet: agent
// definitions (the agents-file schema, one per key) in a JetStream KV
// bucket whose history keeps each agent's revisions. `lovia agents apply
// FILE` writes it; workers started with --registry serve what it holds and
// rebuild their agents after every change, from the next run on, without a
// restart.
//
// # Pinning
//
// A run pins the registry revision it started with (the run record's
// registry_revision): a resume on any worker, after any update, continues
// with the definitions of that revision ([Source.At]), never a mix of two
// versions; the next submission takes the current ones.
//
//	reg, _ := registry.Ensure(ctx, js, names, 1)
//	rep, _ := reg.Apply(ctx, file.Agents, false, opts)
//	src := registry.NewSource(reg, opts, []string{"support", "billing-*"}, log)
//	_ = src.Start(ctx)
//	cat, rev := src.Current()
package registry
