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
// remember(text) stores a note, forget(id) deletes one, recall(query)
// searches the scope's notes and run archives. The newest notes ("hot
// notes", at most [Config.MaxNotes]) are written into the system prompt
// at run start ([Plugin.Instructions]). When a run completes, the plugin
// archives it (its last input and its output) for recall.
//
// Writes are upserts under ids derived from the run id: a note's id is a
// digest of the run id and its text, a run's archive is keyed by its run
// id. A run resumed on another worker that re-executes a remember call, or
// a replayed run that completes again, rewrites the same record instead of
// adding a second.
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
//	  memory: {scope: user, max_notes: 20}
package memory
