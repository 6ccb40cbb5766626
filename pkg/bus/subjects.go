package bus

import (
	"slices"
	"strconv"
	"strings"
)

// Every name on the wire, from docs/protocol.md. Subjects, streams, the workers
// consumer, buckets and the service name all derive from one prefix; a
// [Names] value builds them and rejects identifiers that cannot be subject
// tokens.

// DefaultPrefix is the subject prefix when none is configured.
const DefaultPrefix = "lovia"

// MaxIDLen is the longest identifier (run id, session id, agent or tool
// name, prefix) in characters.
const MaxIDLen = 128

// Message headers (docs/protocol.md#headers).
const (
	// HeaderMsgID deduplicates a publish within the stream's window. Events
	// carry "<run_id>.<seq>", run requests their run id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderEvent is an event's type.
	HeaderEvent = "Lovia-Event"
	// HeaderSeq is an event's seq, in decimal.
	HeaderSeq = "Lovia-Seq"
	// HeaderRequest names the run request (its stream sequence in the runs
	// stream, in decimal) whose claim published the event: it tells the
	// events of one submission from an earlier one's.
	HeaderRequest = "Lovia-Request"
	// HeaderSubmission is set by the API on a run request: the submission
	// of the run it belongs to (1 for the first, one more for each
	// resubmission of a failed run). A worker terminates a request of a
	// submission that has already ended or been superseded, without
	// running it. Raw publishes need not set it.
	HeaderSubmission = "Lovia-Submission"
	// HeaderContinues is set on a request that resumes a parked run: the
	// stream sequence of the request whose claim parked it. The claim
	// continues that submission (run_resumed, not run_started).
	HeaderContinues = "Lovia-Continues"
	// HeaderRecord is set by the API on the request of a run's first
	// submission whose run record it stored in one piece: the record's KV
	// revision and creation time (see RecordStamp). The request's first
	// claim rebuilds the record from the request and that time and
	// compare-and-sets it at that revision without reading it; a request
	// without it, or whose record changed since, is claimed by reading the
	// record. Only the API sets it.
	HeaderRecord = "Lovia-Record"
	// HeaderHighSeq is set on an event published again after a failure: the
	// highest seq published to the run at that time. Such an event may be
	// stored after events with higher seqs, so the run's last stored
	// message is not always its highest seq; LastSeq takes the larger of
	// Lovia-Seq and Lovia-High-Seq. Readers may ignore it.
	HeaderHighSeq = "Lovia-High-Seq"
	// HeaderContentType is a body's encoding: ContentTypeJSON or
	// ContentTypeMsgpack.
	HeaderContentType = "Content-Type"
	// HeaderServiceError and HeaderServiceErrorCode are the NATS micro error
	// headers of an error reply.
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
)

// Subject tokens (docs/protocol.md#subjects), after the prefix.
const (
	tokSubmit  = "submit"
	tokEvents  = "events"
	tokAPI     = "api"
	tokRun     = "run"
	tokSession = "session"
	tokAgents  = "agents"
)

// RunOp is the last token of a run's request/reply subject
// (<p>.api.run.<run_id>.<op>).
type RunOp string

// Run operations.
const (
	OpStatus   RunOp = "status"
	OpApprove  RunOp = "approve"
	OpCancel   RunOp = "cancel"
	OpInject   RunOp = "inject"
	OpUninject RunOp = "uninject"
	// OpDescribe answers a run's description: its status, history,
	// wait and children (RunDescription).
	OpDescribe RunOp = "describe"
)

// RunOps lists every run operation.
func RunOps() []RunOp {
	return []RunOp{OpStatus, OpApprove, OpCancel, OpInject, OpUninject, OpDescribe}
}

// SessionOp is the last token of a session's request/reply subject
// (<p>.api.session.<session_id>.<op>).
type SessionOp string

// Session operations.
const (
	OpSessionGet SessionOp = "get"
	OpRewind     SessionOp = "rewind"
	// OpSessionTrim shortens the stored tool results of older runs.
	OpSessionTrim SessionOp = "trim"
	// OpSessionExport answers the session's entries as JSON lines.
	OpSessionExport SessionOp = "export"
	// OpSessionDelete deletes the session (refused while it has a live run).
	OpSessionDelete SessionOp = "delete"
	// OpSessionHandoff is sent by the worker that ended a session's run:
	// the session's next run (a queued request, or the messages the
	// ended run left in its mailbox) starts, or the session becomes idle.
	OpSessionHandoff SessionOp = "handoff"
)

// SessionOps lists every session operation.
func SessionOps() []SessionOp {
	return []SessionOp{OpSessionGet, OpRewind, OpSessionTrim, OpSessionExport, OpSessionDelete, OpSessionHandoff}
}

// Names builds every subject, stream, consumer and bucket name from a
// prefix. The zero value uses DefaultPrefix. Names is a small value; copy
// it freely.
//
// Streams are the upper-cased prefix plus a suffix (LOVIA_RUNS), buckets the
// lower-cased prefix plus a suffix (lovia_sessions), so two prefixes that
// differ only in case share streams and buckets: use lower case.
type Names struct {
	prefix string
}

// NewNames returns the names for prefix ("" means DefaultPrefix). The
// prefix is one subject token: 1–128 characters of [A-Za-z0-9_-].
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := ValidateID("prefix", prefix); err != nil {
		return Names{}, err
	}
	return Names{prefix: prefix}, nil
}

// Prefix is the subject prefix.
func (n Names) Prefix() string {
	if n.prefix == "" {
		return DefaultPrefix
	}
	return n.prefix
}

func (n Names) upper() string { return strings.ToUpper(n.Prefix()) }
func (n Names) lower() string { return strings.ToLower(n.Prefix()) }

// RunsStream is the work-queue stream of run requests (<P>_RUNS).
func (n Names) RunsStream() string { return n.upper() + "_RUNS" }

// EventsStream is the limits-retention stream of run events (<P>_EVENTS).
func (n Names) EventsStream() string { return n.upper() + "_EVENTS" }

// WorkersConsumer is the durable pull consumer on RunsStream that workers
// of earlier releases claimed every run from. Runs are routed by agent now
// (AgentConsumer); Provision deletes this one, which would overlap them.
func (n Names) WorkersConsumer() string { return "workers" }

// AgentConsumerPrefix starts the name of every agent's consumer.
const AgentConsumerPrefix = "agent-"

// AgentConsumer is the durable pull consumer on RunsStream that the
// workers serving agent claim its runs from (agent-<agent>, filtered on
// Submit(agent)): a worker claims only runs of agents it serves.
func (n Names) AgentConsumer(agent string) (string, error) {
	if err := ValidateID("agent", agent); err != nil {
		return "", err
	}
	return AgentConsumerPrefix + agent, nil
}

// ParseAgentConsumer returns the agent of an AgentConsumer name.
func ParseAgentConsumer(consumer string) (agent string, ok bool) {
	agent, ok = strings.CutPrefix(consumer, AgentConsumerPrefix)
	return agent, ok && ValidateID("agent", agent) == nil
}

// FleetBucket is the KV bucket where live workers announce themselves and
// the agents they serve (key w.<worker>).
func (n Names) FleetBucket() string { return n.lower() + "_fleet" }

// AgentsBucket is the KV bucket of the agents registry: one key per agent,
// each value a full agent definition, its history the agent's revisions.
func (n Names) AgentsBucket() string { return n.lower() + "_agents" }

// WorkerPing is the subject a live worker answers presence pings on
// (<p>.worker.<id>.ping).
func (n Names) WorkerPing(worker string) string { return n.Prefix() + ".worker." + worker + ".ping" }

// Control is the subject the API notifies a run's owner on when its
// control state changed (<p>.control.<run_id>).
func (n Names) Control(runID string) string { return n.Prefix() + ".control." + runID }

// ControlWildcard matches every Control subject.
func (n Names) ControlWildcard() string { return n.Prefix() + ".control.*" }

// DeadLetterStream is the stream that keeps the server's max-deliveries
// advisories of the workers consumer (at-most-once core messages) until a
// worker has failed the run they name.
func (n Names) DeadLetterStream() string { return n.upper() + "_DLQ" }

// DeadLetterConsumer is the workers' shared durable consumer on it.
func (n Names) DeadLetterConsumer() string { return "deadletters" }

// MaxDeliveriesAdvisory matches the advisory subjects the server publishes
// when a run request reached an agent consumer's MaxDeliver.
func (n Names) MaxDeliveriesAdvisory() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + n.RunsStream() + ".*"
}

// SessionsBucket is the KV bucket of conversation segments.
func (n Names) SessionsBucket() string { return n.lower() + "_sessions" }

// CheckpointsBucket is the KV bucket of in-flight run checkpoints.
func (n Names) CheckpointsBucket() string { return n.lower() + "_checkpoints" }

// MailboxBucket is the KV bucket of steering messages, decisions and
// cancels waiting for a run.
func (n Names) MailboxBucket() string { return n.lower() + "_mailbox" }

// RunsBucket is the KV bucket of run records, control records and the
// workers' holdings records.
func (n Names) RunsBucket() string { return n.lower() + "_runs" }

// Buckets lists every KV bucket.
func (n Names) Buckets() []string {
	return []string{n.SessionsBucket(), n.CheckpointsBucket(), n.MailboxBucket(), n.RunsBucket()}
}

// KVStream is the stream behind a KV bucket.
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubject is the subject that stores key in a KV bucket
// ($KV.<bucket>.<key>), the subject to purge or read a key by on the
// stream behind it. key may be a filter with wildcards; it is not checked,
// since KV keys are dotted and the store builds them.
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// KVWildcard matches every key of a KV bucket ($KV.<bucket>.>).
func KVWildcard(bucket string) string { return KVSubject(bucket, ">") }

// ResultsBucket is the object store of tool outputs that compaction
// offloaded (<p>_results), shared by the workers so a recall works on
// whichever worker the run is on.
func (n Names) ResultsBucket() string { return n.lower() + "_results" }

// ServiceName is the NATS micro service that serves the api subjects.
func (n Names) ServiceName() string { return n.Prefix() }

// Submit is the subject a run request for agent is published to
// (<p>.submit.<agent>).
func (n Names) Submit(agent string) (string, error) {
	if err := ValidateID("agent", agent); err != nil {
		return "", err
	}
	return n.Prefix() + "." + tokSubmit + "." + agent, nil
}

// SubmitWildcard matches every Submit subject (<p>.submit.*).
func (n Names) SubmitWildcard() string { return n.Prefix() + "." + tokSubmit + ".*" }

// ParseSubmit returns the agent of a Submit subject.
func (n Names) ParseSubmit(subject string) (agent string, err error) {
	return n.parseOne(subject, tokSubmit, "agent")
}

// Events is the subject of every event of one run (<p>.events.<run_id>).
func (n Names) Events(runID string) (string, error) {
	if err := ValidateID("run_id", runID); err != nil {
		return "", err
	}
	return n.Prefix() + "." + tokEvents + "." + runID, nil
}

// EventsWildcard matches every Events subject (<p>.events.*).
func (n Names) EventsWildcard() string { return n.Prefix() + "." + tokEvents + ".*" }

// ParseEvents returns the run id of an Events subject.
func (n Names) ParseEvents(subject string) (runID string, err error) {
	return n.parseOne(subject, tokEvents, "run_id")
}

// APISubmit is the request/reply subject that validates and enqueues a run
// (<p>.api.submit).
func (n Names) APISubmit() string { return n.Prefix() + "." + tokAPI + "." + tokSubmit }

// Agents is the request/reply subject that lists agents (<p>.api.agents).
func (n Names) Agents() string { return n.Prefix() + "." + tokAPI + "." + tokAgents }

// RegistryOp is an operation of the agents registry API.
type RegistryOp string

// Registry operations (<p>.api.registry.<op>).
const (
	OpRegistryApply   RegistryOp = "apply"
	OpRegistryList    RegistryOp = "list"
	OpRegistryGet     RegistryOp = "get"
	OpRegistryHistory RegistryOp = "history"
	OpRegistryRemove  RegistryOp = "rm"
)

// RegistryAPI is the request/reply subject of a registry operation
// (<p>.api.registry.<op>).
func (n Names) RegistryAPI(op RegistryOp) string {
	return n.Prefix() + "." + tokAPI + ".registry." + string(op)
}

// Workers is the request/reply subject listing the live workers
// (<p>.api.workers).
func (n Names) Workers() string { return n.Prefix() + "." + tokAPI + ".workers" }

// RunsList is the request/reply subject listing runs from the run index
// (<p>.api.runs.list; RunsListRequest, RunsListReply).
func (n Names) RunsList() string { return n.Prefix() + "." + tokAPI + ".runs.list" }

// SessionsList is the request/reply subject listing sessions
// (<p>.api.sessions.list; SessionsListRequest, SessionsListReply).
func (n Names) SessionsList() string { return n.Prefix() + "." + tokAPI + ".sessions.list" }

// APIWildcard matches every api subject (<p>.api.>).
func (n Names) APIWildcard() string { return n.Prefix() + "." + tokAPI + ".>" }

// RunAPI is a run's request/reply subject (<p>.api.run.<run_id>.<op>).
func (n Names) RunAPI(runID string, op RunOp) (string, error) {
	if err := ValidateID("run_id", runID); err != nil {
		return "", err
	}
	if !validRunOp(op) {
		return "", &FieldError{Field: "op", Reason: "unknown run operation " + quote(string(op))}
	}
	return n.Prefix() + "." + tokAPI + "." + tokRun + "." + runID + "." + string(op), nil
}

// RunAPIWildcard matches op for every run (<p>.api.run.*.<op>), the
// subject a service endpoint listens on.
func (n Names) RunAPIWildcard(op RunOp) string {
	return n.Prefix() + "." + tokAPI + "." + tokRun + ".*." + string(op)
}

// ParseRunAPI returns the run id and operation of a RunAPI subject.
func (n Names) ParseRunAPI(subject string) (runID string, op RunOp, err error) {
	id, last, err := n.parseTwo(subject, tokRun, "run_id")
	if err != nil {
		return "", "", err
	}
	if !validRunOp(RunOp(last)) {
		return "", "", &FieldError{Field: "subject", Reason: "unknown run operation " + quote(last)}
	}
	return id, RunOp(last), nil
}

// SessionAPI is a session's request/reply subject
// (<p>.api.session.<session_id>.<op>).
func (n Names) SessionAPI(sessionID string, op SessionOp) (string, error) {
	if err := ValidateID("session_id", sessionID); err != nil {
		return "", err
	}
	if !slices.Contains(SessionOps(), op) {
		return "", &FieldError{Field: "op", Reason: "unknown session operation " + quote(string(op))}
	}
	return n.Prefix() + "." + tokAPI + "." + tokSession + "." + sessionID + "." + string(op), nil
}

// SessionAPIWildcard matches op for every session
// (<p>.api.session.*.<op>).
func (n Names) SessionAPIWildcard(op SessionOp) string {
	return n.Prefix() + "." + tokAPI + "." + tokSession + ".*." + string(op)
}

// ParseSessionAPI returns the session id and operation of a SessionAPI
// subject.
func (n Names) ParseSessionAPI(subject string) (sessionID string, op SessionOp, err error) {
	id, last, err := n.parseTwo(subject, tokSession, "session_id")
	if err != nil {
		return "", "", err
	}
	if !slices.Contains(SessionOps(), SessionOp(last)) {
		return "", "", &FieldError{Field: "subject", Reason: "unknown session operation " + quote(last)}
	}
	return id, SessionOp(last), nil
}

// parseOne parses <p>.<kind>.<id>.
func (n Names) parseOne(subject, kind, field string) (string, error) {
	rest, ok := strings.CutPrefix(subject, n.Prefix()+"."+kind+".")
	if !ok {
		return "", &FieldError{Field: "subject", Reason: quote(subject) + " is not a " + n.Prefix() + "." + kind + " subject"}
	}
	if err := ValidateID(field, rest); err != nil {
		return "", err
	}
	return rest, nil
}

// parseTwo parses <p>.api.<kind>.<id>.<op>.
func (n Names) parseTwo(subject, kind, field string) (id, op string, err error) {
	rest, ok := strings.CutPrefix(subject, n.Prefix()+"."+tokAPI+"."+kind+".")
	if !ok {
		return "", "", &FieldError{Field: "subject", Reason: quote(subject) + " is not a " + n.Prefix() + ".api." + kind + " subject"}
	}
	id, op, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", &FieldError{Field: "subject", Reason: quote(subject) + " has no operation"}
	}
	if err := ValidateID(field, id); err != nil {
		return "", "", err
	}
	return id, op, nil
}

func validRunOp(op RunOp) bool {
	switch op {
	case OpStatus, OpApprove, OpCancel, OpInject, OpUninject, OpDescribe:
		return true
	}
	return false
}

// ValidateID checks an identifier that becomes a subject token: 1–128
// characters of [A-Za-z0-9_-]; so no dots, spaces or wildcards. The error
// is a *FieldError naming field; it matches ErrInvalidToken and
// ErrInvalidRequest.
func ValidateID(field, value string) error {
	if reason := idProblem(value); reason != "" {
		return &FieldError{Field: field, Reason: reason, token: true}
	}
	return nil
}

func idProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxIDLen {
		return "longer than 128 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			continue
		case c == '.':
			return quote(s) + " contains '.', which separates subject tokens; use 1–128 characters of [A-Za-z0-9_-]"
		case c == '*' || c == '>':
			return quote(s) + " contains the wildcard " + quote(string(c)) + "; use 1–128 characters of [A-Za-z0-9_-]"
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			return quote(s) + " contains white space; use 1–128 characters of [A-Za-z0-9_-]"
		default:
			return quote(s) + " contains a character outside [A-Za-z0-9_-]"
		}
	}
	return ""
}

// quote quotes s for an error message, shortened to 64 bytes.
func quote(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		s = s[:maxLen] + "…"
	}
	return strconv.Quote(s)
}

// tokSchedule is the subject token of schedule messages.
const tokSchedule = "schedule"

// Schedule is the subject of a schedule's message in RunsStream
// (<p>.schedule.<name>): the server fires it to the agent's Submit subject
// (see package schedule).
func (n Names) Schedule(name string) (string, error) {
	if err := ValidateID("schedule", name); err != nil {
		return "", err
	}
	return n.Prefix() + "." + tokSchedule + "." + name, nil
}

// ScheduleWildcard matches every Schedule subject (<p>.schedule.*).
func (n Names) ScheduleWildcard() string { return n.Prefix() + "." + tokSchedule + ".*" }

// ParseSchedule returns the name of a Schedule subject.
func (n Names) ParseSchedule(subject string) (name string, err error) {
	return n.parseOne(subject, tokSchedule, "schedule")
}

// SkillsBucket is the object store of the Skills plugin (<p>_skills): one
// object per file, named <skill folder>/<path>, written by `lovia skills
// push` and read by every worker at each run.
func (n Names) SkillsBucket() string { return n.lower() + "_skills" }

// ToolCallsBucket is the KV bucket where a tool service with the call-id
// dedupe keeps each call's reply (<p>_tool_calls; package toolsvc).
func (n Names) ToolCallsBucket() string { return n.lower() + "_tool_calls" }

// MemoryBucket is the KV bucket of the Memory plugin (<p>_memory): notes
// and run archives per scope, shared by every worker.
func (n Names) MemoryBucket() string { return n.lower() + "_memory" }

// SchedulesStream is the stream of schedules and their fires
// (<P>_SCHEDULES); RunsStream sources the fires as run requests.
func (n Names) SchedulesStream() string { return n.upper() + "_SCHEDULES" }

// tokFire is the subject token of schedule fires.
const tokFire = "fire"

// Fire is the subject a schedule of agent fires to in SchedulesStream
// (<p>.fire.<agent>); RunsStream sources it as Submit(agent).
func (n Names) Fire(agent string) (string, error) {
	if err := ValidateID("agent", agent); err != nil {
		return "", err
	}
	return n.Prefix() + "." + tokFire + "." + agent, nil
}

// FireWildcard matches every Fire subject (<p>.fire.*).
func (n Names) FireWildcard() string { return n.Prefix() + "." + tokFire + ".*" }

// ScheduleOp is the last token of a schedule API subject
// (<p>.api.schedule.<op>).
type ScheduleOp string

// Schedule operations.
const (
	OpScheduleAdd    ScheduleOp = "add"
	OpScheduleList   ScheduleOp = "ls"
	OpScheduleGet    ScheduleOp = "get"
	OpScheduleRemove ScheduleOp = "rm"
	OpSchedulePause  ScheduleOp = "pause"
	OpScheduleResume ScheduleOp = "resume"
)

// ScheduleAPI is the request/reply subject of a schedule operation
// (<p>.api.schedule.<op>).
func (n Names) ScheduleAPI(op ScheduleOp) string {
	return n.Prefix() + "." + tokAPI + "." + tokSchedule + "." + string(op)
}
