package bus

// MetaParentRunID is the run request metadata key that names the run which
// started this one (a subagent's parent). The run index keeps it as the
// run's parent_run_id, shown in its status reply and its run_started event
// (docs/protocol.md#run-trees).
const MetaParentRunID = "parent_run_id"

// ParentRunID returns the parent run id a request's metadata names, or ""
// when it names none (or names it with a value that is not a valid id).
func ParentRunID(metadata map[string]any) string {
	id, _ := metadata[MetaParentRunID].(string)
	if id == "" || ValidateID("parent_run_id", id) != nil {
		return ""
	}
	return id
}
