// Package skills is the Skills plugin: folders of reference material the
// model loads on demand.
//
// # Skills
//
// A skill is a folder holding a SKILL.md whose YAML front matter gives its
// name and a one-line description, and any other files it refers to:
//
//	pdf-forms/
//	  SKILL.md        ---\nname: pdf-forms\ndescription: Fill PDF forms.\n---\n…
//	  reference.md
//
// The plugin lists every skill's name and description in the system prompt
// ([Plugin.Instructions]); load_skill(name) returns a SKILL.md body and the
// names of the skill's other files, read_skill_file(name, path) one of
// those files. Both frame the text as reference material, cap it at
// [Config.MaxChars], and refuse paths that leave the skill folder
// (absolute paths, "..", and for a folder on disk symbolic links that
// point outside it).
//
// # Sources
//
// A [Source] holds the folders: [Dir] reads a folder on the worker's disk;
// [ObjectStore] reads the fleet's JetStream object store, which
// [Push] (`lovia skills push DIR`) fills, so every worker serves the same
// skills without files shipped to each machine. The index and the files
// are read at each run, so a pushed change is seen by the next run.
//
// # Wiring
//
// The index depends on the run's moment, not on the agent, so it is an
// instruction fragment rather than static plugin instructions: use
// [Attach] to add both the plugin and its fragment to an agent. From the
// agents file:
//
//	plugins:
//	  skills: {}              # the fleet's object store
//	  # skills: {dir: ./skills} # or a folder on each worker
package skills
