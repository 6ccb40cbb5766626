package toolsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// DefaultDiscoverWait is how long [Discover] collects answers.
const DefaultDiscoverWait = 300 * time.Millisecond

// DefaultCallTimeout bounds a call whose context has no deadline.
const DefaultCallTimeout = 30 * time.Second

// ServiceInfo is one tool service as its running instances describe it.
type ServiceInfo struct {
	Name        string     `json:"name"`
	Version     string     `json:"version"`
	Description string     `json:"description,omitempty"`
	Instances   int        `json:"instances"`
	Tools       []ToolInfo `json:"tools"`
}

// ToolInfo is one endpoint of a tool service.
type ToolInfo struct {
	// Name is what agents call: <service>__<tool>.
	Name        string          `json:"name"`
	Service     string          `json:"service"`
	Tool        string          `json:"tool"`
	Subject     string          `json:"subject"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
}

// Discover asks every micro service on the connection for its info
// ($SRV.INFO) and returns the tool services of the fleet with prefix:
// those whose endpoints live under <prefix>.tools., sorted by name, with
// the number of instances that answered within wait (0: 300ms).
func Discover(ctx context.Context, nc *nats.Conn, prefix string, wait time.Duration) ([]ServiceInfo, error) {
	if wait <= 0 {
		wait = DefaultDiscoverWait
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("toolsvc: discover: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	subject, _ := micro.ControlSubject(micro.InfoVerb, "", "")
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("toolsvc: discover: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	byName := map[string]*ServiceInfo{}
	ids := map[string]map[string]bool{}
	want := SubjectPrefix(prefix)
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) != nil {
			continue
		}
		var tools []ToolInfo
		for _, e := range info.Endpoints {
			if !strings.HasPrefix(e.Subject, want) {
				continue
			}
			tools = append(tools, ToolInfo{
				Name: info.Name + Separator + e.Name, Service: info.Name, Tool: e.Name, Subject: e.Subject,
				Description: e.Metadata[MetaDescription], Schema: json.RawMessage(e.Metadata[MetaSchema]),
			})
		}
		if len(tools) == 0 {
			continue
		}
		si := byName[info.Name]
		if si == nil {
			si = &ServiceInfo{Name: info.Name, Version: info.Version, Description: info.Description, Tools: tools}
			byName[info.Name], ids[info.Name] = si, map[string]bool{}
		}
		if !ids[info.Name][info.ID] {
			ids[info.Name][info.ID] = true
			si.Instances++
		}
	}
	out := make([]ServiceInfo, 0, len(byName))
	for _, si := range byName {
		sort.Slice(si.Tools, func(i, j int) bool { return si.Tools[i].Name < si.Tools[j].Name })
		out = append(out, *si)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Call is what a caller knows about one tool call, sent as headers.
type Call struct {
	RunID, CallID, Agent string
}

// CallerConfig configures the loop tools that call tool services.
type CallerConfig struct {
	// Conn is the NATS connection (required).
	Conn *nats.Conn
	// CallOf returns the run, call id and agent of the call a tool
	// function runs for, from its context; they become the Lovia-Run-Id,
	// Lovia-Call-Id and Lovia-Agent headers. Nil: no headers (and so no
	// dedupe by the service).
	CallOf func(ctx context.Context, rc *loop.RunContext) Call
	// Timeout bounds a call whose context has no deadline (default 30s).
	Timeout time.Duration
}

// Tool returns a loop tool that calls the tool service endpoint info
// describes: arguments are validated against its schema before the call;
// an error reply is an error result the model sees; no responders and
// timeouts are tool errors naming the service and what to do.
func Tool(cfg CallerConfig, info ToolInfo) (*loop.Tool, error) {
	if cfg.Conn == nil {
		return nil, errors.New("toolsvc: CallerConfig.Conn is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultCallTimeout
	}
	params := info.Schema
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	// The same validator, and so the same messages, as Go tools: keywords
	// it does not check are left to the service (jsonschema.Parse).
	resolved, err := jsonschema.Parse(params)
	if err != nil {
		return nil, fmt.Errorf("toolsvc: %s: schema: %w", info.Name, err)
	}
	c := &caller{cfg: cfg, info: info, schema: resolved}
	return &loop.Tool{Name: info.Name, Description: info.Description, Parameters: params, Func: c.call}, nil
}

type caller struct {
	cfg    CallerConfig
	info   ToolInfo
	schema *jsonschema.Schema
}

func (c *caller) call(ctx context.Context, rc *loop.RunContext, args json.RawMessage) (any, error) {
	name := c.info.Name
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var in any
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, &loop.InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
	}
	if err := c.schema.Validate(in); err != nil {
		return nil, &loop.InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	msg := nats.NewMsg(c.info.Subject)
	msg.Data = args
	if c.cfg.CallOf != nil {
		call := c.cfg.CallOf(ctx, rc)
		setHeader(msg, HeaderRunID, call.RunID)
		setHeader(msg, HeaderCallID, call.CallID)
		setHeader(msg, HeaderAgent, call.Agent)
	}
	// A client span inside the loop's tool_call (noop when the run is not
	// traced); the service continues its trace from the headers.
	ctx, span := telemetry.StartChild(ctx, "toolsvc_call", trace.SpanKindClient,
		attribute.String("lovia.tool_service", c.info.Service), attribute.String("lovia.tool", c.info.Tool))
	bus.InjectTrace(ctx, msg.Header)
	reply, err := c.cfg.Conn.RequestMsgWithContext(ctx, msg)
	telemetry.EndSpan(span, err)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &loop.ToolError{Tool: name, Message: fmt.Sprintf("no instance of tool service %q is running (nothing answers %s)", c.info.Service, c.info.Subject),
			Hint: "start the service, or check that it uses this fleet's subject prefix", Cause: ErrNoService}
	case err != nil && ctx.Err() != nil:
		return nil, &loop.ToolError{Tool: name, Message: fmt.Sprintf("tool service %q did not answer %s in time", c.info.Service, name),
			Hint: "the service may be overloaded or the tool slow: raise the tool's timeout or add instances", Cause: fmt.Errorf("%w: %w", ErrTimeout, err)}
	case err != nil:
		return nil, &loop.ToolError{Tool: name, Message: fmt.Sprintf("calling tool service %q failed: %v", c.info.Service, err), Hint: "call the tool again", Cause: err}
	}
	if desc := reply.Header.Get(micro.ErrorHeader); desc != "" || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		switch reply.Header.Get(micro.ErrorCodeHeader) {
		case CodeInvalidArguments:
			return nil, &loop.InvalidToolArguments{Tool: name, Message: desc}
		case CodeUnavailable:
			return nil, &loop.ToolError{Tool: name, Message: desc, Hint: "call the tool again", Cause: ErrDedupe}
		case CodeConflict:
			return nil, &loop.ToolError{Tool: name, Message: desc, Hint: "a call id names one call: make a new call for other arguments", Cause: ErrCallConflict}
		}
		return nil, &loop.ToolError{Tool: name, Message: desc}
	}
	return decodeResult(reply.Data), nil
}

func setHeader(m *nats.Msg, k, v string) {
	if v != "" {
		m.Header.Set(k, v)
	}
}

// decodeResult reads a reply body: JSON objects, arrays, numbers and
// booleans as values; anything else (text, a JSON string) as text.
func decodeResult(b []byte) any {
	var v any
	if json.Unmarshal(b, &v) == nil {
		if s, ok := v.(string); ok {
			return s
		}
		if v != nil {
			return v
		}
	}
	return string(b)
}
