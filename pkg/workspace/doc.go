// Package workspace keeps agents' file trees in JetStream, so a run's
// files move with the run: a run resumed on another worker after a crash
// reads exactly the files its checkpointed tool calls wrote.
//
// # Layout
//
// A [Store] holds every tree in two buckets shared by the fleet:
//
//   - the manifest KV bucket (<p>_workspace): one key per tree,
//     <kind>.<id> (session.<session id> or run.<run id)), whose JSON value
//     maps each path to its [Entry] (object name, size, SHA-256 digest,
//     revision), with the tree's total size and the ids of its last
//     changes;
//   - the files object store (<p>_workspace_files): one object per written
//     version of a file, named <kind>.<id>/<unique id>.
//
// # Changes
//
// A change ([Tree.Write], [Tree.Edit], [Tree.Delete]) stores the new
// content as a new object, then writes the manifest with compare-and-set
// on the revision it read; when another writer got there first it reads
// the newer manifest and applies the change again (an edit re-reads the
// file), so two writers never lose each other's updates. The object of
// the version it replaced is deleted by a later change, once no reader can still be reading it (GarbageGrace). [Once] makes a change
// idempotent by id, which is how a tool call re-run after a crash finds
// its own change already made and answers as the first attempt did.
//
// # Limits
//
// Paths are relative to the tree's root; [Clean] refuses absolute paths,
// "..", control characters and backslashes. [Limits] caps one file, the
// tree's total size (its quota) and its file count. [Tree.Import] copies
// a local folder in and refuses symlinks that leave it; [Tree.Export]
// writes the tree into a local folder, never outside it. Every refusal is
// an *[Error] matching a sentinel (ErrInvalidPath, ErrTooLarge, ErrQuota,
// ErrNotFound, ErrNoMatch, ErrAmbiguous …) whose text says what to do.
//
// # Policy
//
// A [Policy] is an ordered list of path globs with allow, ask or deny;
// the tools of package catalog's `workspace:` section enforce deny and
// turn ask into the run's approval gate.
package workspace
