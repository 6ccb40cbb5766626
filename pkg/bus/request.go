package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// DefaultMaxTurns is max_turns when a request does not set it.
const DefaultMaxTurns = 50

// IfRunExists is the policy when a submitted run id already has a
// checkpoint (docs/protocol.md#run-request).
type IfRunExists string

// Policies. The empty value means IfExistsResume.
const (
	IfExistsResume     IfRunExists = "resume"
	IfExistsRestart    IfRunExists = "restart"
	IfExistsFail       IfRunExists = "fail"
	IfExistsResumeOnly IfRunExists = "resume_only"
)

// RunRequest is a run submission: the body of <p>.submit.<agent> and of
// <p>.api.submit. Zero fields are omitted on the wire and mean the
// protocol's default.
type RunRequest struct {
	// RunID is the run's idempotency key; generated when empty.
	RunID string `json:"run_id,omitempty" msgpack:"run_id,omitempty"`
	// Agent is the agent to run; on a raw publish the subject's token wins.
	Agent string `json:"agent,omitempty" msgpack:"agent,omitempty"`
	// Input is the run's input: a string or a list of {role, content}.
	Input Input `json:"input,omitzero" msgpack:"input,omitempty"`
	// SessionID names the conversation to load and append to.
	SessionID string `json:"session_id,omitempty" msgpack:"session_id,omitempty"`
	// MaxTurns caps model turns; 0 means DefaultMaxTurns.
	MaxTurns int `json:"max_turns,omitempty" msgpack:"max_turns,omitempty"`
	// Budget caps tokens, tool calls and wall time.
	Budget *Budget `json:"budget,omitempty" msgpack:"budget,omitempty"`
	// OutputSchema is a JSON Schema for structured output.
	OutputSchema RawJSON `json:"output_schema,omitzero" msgpack:"output_schema,omitempty"`
	// ExtraInstructions is appended to every active agent's system prompt.
	ExtraInstructions string `json:"extra_instructions,omitempty" msgpack:"extra_instructions,omitempty"`
	// IfRunExists is the policy for a run id that has a checkpoint.
	IfRunExists IfRunExists `json:"if_run_exists,omitempty" msgpack:"if_run_exists,omitempty"`
	// Encoding is the encoding of the run's events; empty means the
	// encoding the request arrived in.
	Encoding Encoding `json:"encoding,omitempty" msgpack:"encoding,omitempty"`
	// Metadata is carried to the run context and the status record.
	Metadata map[string]any `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
	// OnBusy is what the API does with a new run for a session that has a
	// live run (queued, running or parked): OnBusyInject (the default)
	// sends the input to that run's mailbox, OnBusyQueue starts the run
	// when the live one ends, OnBusyRefuse refuses it (SessionBusy, naming
	// the live run). Workers ignore it: a raw publish is not checked.
	OnBusy OnBusy `json:"on_busy,omitempty" msgpack:"on_busy,omitempty"`
}

// OnBusy is a run request's policy for a session with a live run.
type OnBusy string

// The policies. The empty value means OnBusyInject.
const (
	OnBusyInject OnBusy = "inject"
	OnBusyQueue  OnBusy = "queue"
	OnBusyRefuse OnBusy = "refuse"
)

// Budget caps a run; zero fields are unlimited.
type Budget struct {
	MaxInputTokens  int64   `json:"max_input_tokens,omitempty" msgpack:"max_input_tokens,omitempty"`
	MaxOutputTokens int64   `json:"max_output_tokens,omitempty" msgpack:"max_output_tokens,omitempty"`
	MaxTotalTokens  int64   `json:"max_total_tokens,omitempty" msgpack:"max_total_tokens,omitempty"`
	MaxToolCalls    int64   `json:"max_tool_calls,omitempty" msgpack:"max_tool_calls,omitempty"`
	MaxSeconds      float64 `json:"max_seconds,omitempty" msgpack:"max_seconds,omitempty"`
}

// Input is a run's input: either Text (a string on the wire) or Messages
// (a list of {role, content}). The zero value is absent.
type Input struct {
	Text     string
	Messages []InputMessage
}

// InputMessage is one item of a list input.
type InputMessage struct {
	Role    string `json:"role" msgpack:"role"`
	Content string `json:"content" msgpack:"content"`
}

// TextInput returns a string input.
func TextInput(s string) Input { return Input{Text: s} }

// MessagesInput returns a list input.
func MessagesInput(msgs ...InputMessage) Input {
	if msgs == nil {
		msgs = []InputMessage{}
	}
	return Input{Messages: msgs}
}

// IsZero reports whether no input was given.
func (in Input) IsZero() bool { return in.Text == "" && in.Messages == nil }

// IsList reports whether the input is a list of messages.
func (in Input) IsList() bool { return in.Messages != nil }

// AsMessages returns the input as a list: a string is one user message.
func (in Input) AsMessages() []InputMessage {
	if in.IsList() {
		return in.Messages
	}
	if in.Text == "" {
		return nil
	}
	return []InputMessage{{Role: "user", Content: in.Text}}
}

// Entries converts the input to transcript entries: a string is one user
// input entry; a list is converted message by message (system and user
// become input entries, assistant an assistant_text entry).
func (in Input) Entries() []loop.Entry {
	if !in.IsList() {
		if in.Text == "" {
			return nil
		}
		return []loop.Entry{loop.UserText(in.Text)}
	}
	out := make([]loop.Entry, 0, len(in.Messages))
	for _, m := range in.Messages {
		switch m.Role {
		case "assistant":
			out = append(out, loop.AssistantText(m.Content))
		default:
			out = append(out, loop.Entry{Kind: loop.KindInput, Role: loop.Role(m.Role), Content: m.Content})
		}
	}
	return out
}

// MarshalJSON writes a string or a list.
func (in Input) MarshalJSON() ([]byte, error) {
	if in.IsList() {
		return json.Marshal(in.Messages)
	}
	return json.Marshal(in.Text)
}

// UnmarshalJSON reads a string, a list of {role, content} or null.
func (in *Input) UnmarshalJSON(b []byte) error {
	*in = Input{}
	t := bytes.TrimSpace(b)
	switch {
	case bytes.Equal(t, []byte("null")):
		return nil
	case len(t) > 0 && t[0] == '"':
		return json.Unmarshal(t, &in.Text)
	case len(t) > 0 && t[0] == '[':
		msgs := []InputMessage{}
		if err := json.Unmarshal(t, &msgs); err != nil {
			return err
		}
		in.Messages = msgs
		return nil
	}
	return fmt.Errorf("input: want a string or a list of {role, content}")
}

// EncodeMsgpack writes a string or an array.
func (in Input) EncodeMsgpack(enc *msgpack.Encoder) error {
	if in.IsList() {
		return enc.Encode(in.Messages)
	}
	return enc.EncodeString(in.Text)
}

// DecodeMsgpack reads a string, an array of {role, content} or nil.
func (in *Input) DecodeMsgpack(dec *msgpack.Decoder) error {
	*in = Input{}
	c, err := dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		return dec.DecodeNil()
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		in.Text, err = dec.DecodeString()
		return err
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		msgs := []InputMessage{}
		if err := dec.Decode(&msgs); err != nil {
			return err
		}
		in.Messages = msgs
		return nil
	}
	return fmt.Errorf("input: want a string or a list of {role, content}")
}

// Validate checks the request against the wire contract: identifiers are
// subject tokens, enumerations hold known values, numbers are not
// negative, list inputs have known roles and are not empty, the output
// schema is a JSON Schema object, and a new run has an input: Input may be
// omitted only with a RunID (the resubmission of an existing run resumes
// it) and without if_run_exists restart. It does not require Agent (the
// subject may name it). The error is a *FieldError naming the field. The
// API's submit and the workers validate with it, so every API instance
// refuses the same requests.
func (r *RunRequest) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"run_id", r.RunID}, {"agent", r.Agent}, {"session_id", r.SessionID},
	} {
		if f.value != "" {
			if err := ValidateID(f.name, f.value); err != nil {
				return err
			}
		}
	}
	for i, m := range r.Input.Messages {
		switch m.Role {
		case "user", "system", "assistant":
		default:
			return &FieldError{Field: "input[" + strconv.Itoa(i) + "].role", Reason: fmt.Sprintf("%s is not user, system or assistant", quote(m.Role))}
		}
		if strings.TrimSpace(m.Content) == "" {
			return &FieldError{Field: "input[" + strconv.Itoa(i) + "].content", Reason: "is empty: give each message's text"}
		}
	}
	if r.MaxTurns < 0 {
		return &FieldError{Field: "max_turns", Reason: "must not be negative"}
	}
	if b := r.Budget; b != nil {
		for _, f := range []struct {
			name  string
			value int64
		}{
			{"budget.max_input_tokens", b.MaxInputTokens}, {"budget.max_output_tokens", b.MaxOutputTokens},
			{"budget.max_total_tokens", b.MaxTotalTokens}, {"budget.max_tool_calls", b.MaxToolCalls},
		} {
			if f.value < 0 {
				return &FieldError{Field: f.name, Reason: "must not be negative"}
			}
		}
		if b.MaxSeconds < 0 || math.IsNaN(b.MaxSeconds) || math.IsInf(b.MaxSeconds, 0) {
			return &FieldError{Field: "budget.max_seconds", Reason: "must be a finite number, not negative"}
		}
	}
	switch r.IfRunExists {
	case "", IfExistsResume, IfExistsRestart, IfExistsFail, IfExistsResumeOnly:
	default:
		return &FieldError{Field: "if_run_exists", Reason: fmt.Sprintf("%s is not resume, restart, fail or resume_only", quote(string(r.IfRunExists)))}
	}
	switch r.OnBusy {
	case "", OnBusyInject, OnBusyQueue, OnBusyRefuse:
	default:
		return &FieldError{Field: "on_busy", Reason: fmt.Sprintf("%s is not inject, queue or refuse", quote(string(r.OnBusy)))}
	}
	if r.Encoding != "" && !r.Encoding.Valid() {
		return &FieldError{Field: "encoding", Reason: fmt.Sprintf("%s is not json or msgpack", quote(string(r.Encoding)))}
	}
	if len(r.OutputSchema) > 0 {
		if err := checkSchema(r.OutputSchema); err != nil {
			return err
		}
	}
	noInput := r.Input.IsZero() || r.Input.IsList() && len(r.Input.Messages) == 0
	if noInput && (r.RunID == "" || r.IfRunExists == IfExistsRestart) {
		return &FieldError{Field: "input", Reason: "is required: a string, or a list of {role, content} (only the resubmission of an existing run_id may omit it)"}
	}
	return nil
}

// EventEncoding is the encoding of the run's events: the request's
// encoding field, else the encoding it arrived in.
func (r *RunRequest) EventEncoding(arrived Encoding) Encoding {
	if r.Encoding != "" {
		return r.Encoding
	}
	if arrived == "" {
		return JSON
	}
	return arrived
}

// DecodeRunRequest decodes and validates a run request, returning the
// encoding it arrived in. Errors match ErrUnknownEncoding, ErrMalformed
// or ErrInvalidRequest (a *FieldError naming the field: an unknown
// top-level field is refused with the list of known ones, an input given
// as "" as empty, then [RunRequest.Validate]).
//
// On an error the request is not nil when its run id could be read: the
// decoded request when only validation failed, else what [PeekRunRequest]
// reads (a wrong type, a malformed field). A worker reports the failure
// on that run's own subject.
func DecodeRunRequest(h nats.Header, body []byte) (*RunRequest, Encoding, error) {
	var r RunRequest
	enc, err := Decode(h, body, &r)
	if err != nil {
		return PeekRunRequest(h, body), enc, &DecodeError{What: "run request", Encoding: enc, Err: err}
	}
	if err := checkFields(enc, body); err != nil {
		return &r, enc, err
	}
	if err := r.Validate(); err != nil {
		return &r, enc, err
	}
	return &r, enc, nil
}

// RequestMeta is what PublishRequest sends with a run request besides its
// body.
type RequestMeta struct {
	// RunID and Suffix make the Nats-Msg-Id, "<run_id>[.<submission>]<suffix>"
	// (the submission when above 1): the stream drops a repeat within its
	// deduplication window. RunID is required.
	RunID  string
	Suffix string
	// ContentType is the body's (Content-Type). Required.
	ContentType string
	// Submission, when above 0, is the run's submission (HeaderSubmission).
	Submission int
	// Continues, when above 0, is the stream sequence of the request whose
	// submission this one continues (HeaderContinues).
	Continues uint64
	// Trace is the W3C trace context the request carries (traceparent,
	// tracestate): the claim of the run continues that trace. Zero: none.
	Trace TraceContext
	// Record, when not zero, is the run record a first submission's
	// publisher stored (HeaderRecord).
	Record RecordStamp
}

// PublishRequest publishes an encoded run request to <p>.submit.<agent> on
// the runs stream and returns the stream sequence it is stored at.
func PublishRequest(ctx context.Context, js jetstream.JetStream, names Names, agent string, body []byte, meta RequestMeta) (uint64, error) {
	msg, msgID, err := requestMsg(names, agent, body, meta)
	if err != nil {
		return 0, err
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("bus: publish run request %s: %w", msgID, err)
	}
	return ack.Sequence, nil
}

// PublishRequest is the package's PublishRequest on the publisher's
// connection, its ack read by hand (see JetStreamPublisher).
func (p *Publisher) PublishRequest(ctx context.Context, agent string, body []byte, meta RequestMeta) (uint64, error) {
	msg, msgID, err := requestMsg(p.names, agent, body, meta)
	if err != nil {
		return 0, err
	}
	ack, err := p.jsp.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("bus: publish run request %s: %w", msgID, err)
	}
	return ack.Sequence, nil
}

// requestMsg is the message of a run request and its message id.
func requestMsg(names Names, agent string, body []byte, meta RequestMeta) (*nats.Msg, string, error) {
	subj, err := names.Submit(agent)
	if err != nil {
		return nil, "", err
	}
	msgID := meta.RunID
	if meta.Submission > 1 {
		msgID += "." + strconv.Itoa(meta.Submission)
	}
	msgID += meta.Suffix
	msg := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{
		HeaderMsgID:       []string{msgID},
		HeaderContentType: []string{meta.ContentType},
	}}
	if meta.Submission > 0 {
		msg.Header[HeaderSubmission] = []string{strconv.Itoa(meta.Submission)}
	}
	if meta.Continues > 0 {
		msg.Header[HeaderContinues] = []string{strconv.FormatUint(meta.Continues, 10)}
	}
	meta.Trace.Set(msg.Header)
	meta.Record.Set(msg.Header)
	return msg, msgID, nil
}
