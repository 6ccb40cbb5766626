// Package memory is the Memory plugin: notes the model keeps across runs,
// in a store every worker shares.
//
// # Scopes
//
// Memories belong to a scope: the run's session ([BySession], the
// default) or its user ([ByUser]: the run's metadata key "user_id", or
// [Config.UserKey]). A run without one has no memory; its memory tools say
// how to give it one.
//
// # Tools, notes and archives
//
// remember(text) stores a note (one that says what a note of the scope
// already says, case and spacing aside, is not stored again), forget(id)
// deletes one, recall(query) searches the scope's notes, retired notes
// and run archives. The newest notes ("hot
// notes", at most [Config.MaxNotes]) are written into the system prompt
// at run start ([Plugin.Instructions]). When a run completes, the plugin
// archives it (its last input and its output) for recall.
//
// A note's id is a digest of its text (case, spacing and a final period
// aside: [NoteID]), created once: concurrent runs of one user remembering
// the same fact, or a run resumed on another worker that re-executes a
// remember call, write one note. A run's archive is an upsert keyed by its
// run id, so a replayed run that completes again rewrites it.
//
// # Curation
//
// At the end of each completed run the plugin archives it. With
// [Config.DreamEvery] set, every DreamEvery-th archived run of a scope
// then "dreams": a model ([Config.DreamModel], by default the agent's
// own) rewrites the scope's notes — duplicates merged, notes a later one
// contradicts dropped, at most [Config.MaxNotes] kept — and the rewrite
// replaces them. One run of the whole fleet dreams per epoch: the epoch's
// [KindDream] record, created once ([Store.Create]), elects it, so a
// replayed, resumed or concurrent completion does not dream again; the
// record then says what the dream did. The new notes are written before
// any old one is removed, and each replaced note is kept as a
// [KindRetired] record that recall still finds: a crash or a failed model
// call loses nothing, and an answer that is not a list of at most
// MaxNotes notes changes nothing. The dream runs before the run's
// run_completed is published (bounded by [Config.DreamTimeout]).
//
// # Stores
//
// [KV] keeps memories in a JetStream KV bucket (bus.Names.MemoryBucket),
// so a conversation continued on any worker sees the same memory and `lovia
// memory show SCOPE` prints it. [MemoryStore] keeps them in process.
//
// Use [Attach] to add the plugin and its notes fragment to an agent. From
// the agents file:
//
//	plugins:
//	  memory: {scope: user, max_notes: 20, dream_every: 10}
package memory
