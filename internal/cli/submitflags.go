package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// submitFlags are the flags of lovia run and lovia submit: what the run
// request carries besides its input.
type submitFlags struct {
	agent, session, runID string
	ifExists, onBusy      string
	inputFile             string
	metadata              metadataFlag
}

func addSubmitFlags(fs *flag.FlagSet) *submitFlags {
	f := &submitFlags{metadata: metadataFlag{}}
	fs.StringVar(&f.agent, "agent", "demo", "agent to run")
	fs.StringVar(&f.session, "session", "", "session id to load and append to")
	fs.StringVar(&f.runID, "run-id", "", "the run's id, its idempotency key: submitting the same id again does not start a second run (default: generated)")
	fs.StringVar(&f.ifExists, "if-run-exists", "", "when --run-id already names a run: resume (the default), restart, fail or resume_only")
	fs.StringVar(&f.onBusy, "on-busy", "", "when --session has a live run: inject (the default: the input goes to that run's next turn), queue (run after it) or refuse")
	fs.StringVar(&f.inputFile, "input-file", "", "read the input from this file (- is stdin) instead of the arguments")
	fs.Var(f.metadata, "metadata", "`key=value` carried to the run's context and status, e.g. user_id=u1 for the Memory plugin; key:=JSON for a number, list or object (repeatable)")
	return f
}

// request builds the run request from the flags and the positional
// arguments: the input is the arguments joined by spaces, stdin when the
// only argument is -, or --input-file. The error is a usage error.
func (f *submitFlags) request(pos []string, stdin io.Reader) (*bus.RunRequest, error) {
	var input string
	switch {
	case f.inputFile != "" && len(pos) > 0:
		return nil, errors.New("give the input as arguments or with --input-file, not both")
	case f.fromStdin(pos):
		if stdin == nil {
			return nil, errors.New("no stdin to read the input from")
		}
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading the input from stdin: %w", err)
		}
		input = string(b)
	case f.inputFile != "":
		b, err := os.ReadFile(f.inputFile)
		if err != nil {
			return nil, fmt.Errorf("--input-file: %w", err)
		}
		input = string(b)
	case len(pos) == 0:
		return nil, errors.New("INPUT is required: give it as arguments, - to read stdin, or --input-file FILE")
	default:
		input = strings.Join(pos, " ")
	}
	if strings.TrimSpace(input) == "" {
		return nil, errors.New("the input is empty: give the text the agent should work on")
	}
	req := &bus.RunRequest{RunID: f.runID, Agent: f.agent, SessionID: f.session, Input: bus.TextInput(input),
		IfRunExists: bus.IfRunExists(f.ifExists), OnBusy: bus.OnBusy(f.onBusy)}
	if len(f.metadata) > 0 {
		req.Metadata = f.metadata
	}
	if req.IfRunExists != "" && req.RunID == "" {
		return nil, errors.New("--if-run-exists applies to a run id given again: add --run-id")
	}
	if req.OnBusy != "" && req.SessionID == "" {
		return nil, errors.New("--on-busy applies to a session's live run: add --session")
	}
	if err := req.Validate(); err != nil {
		var fe *bus.FieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("--%s %s", flagOfField(fe.Field), fe.Reason)
		}
		return nil, err
	}
	return req, nil
}

// fromStdin reports whether the input is read from stdin: --input-file -,
// or - as the only argument.
func (f *submitFlags) fromStdin(pos []string) bool {
	return f.inputFile == "-" || len(pos) == 1 && pos[0] == "-"
}

// flagOfField is the flag that sets a run request's field.
func flagOfField(field string) string {
	switch field {
	case "run_id":
		return "run-id"
	case "session_id":
		return "session"
	case "if_run_exists":
		return "if-run-exists"
	case "on_busy":
		return "on-busy"
	}
	return field
}

// metadataFlag is a repeatable key=value (or key:=JSON) flag.
type metadataFlag map[string]any

func (m metadataFlag) String() string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(map[string]any(m))
	return string(b)
}

func (m metadataFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" || k == ":" {
		return fmt.Errorf("%q: want key=value (or key:=JSON), e.g. user_id=u1", v)
	}
	if key, isJSON := strings.CutSuffix(k, ":"); isJSON {
		var x any
		if err := json.Unmarshal([]byte(val), &x); err != nil {
			return fmt.Errorf("%q: the value after := is not JSON (%v); use key=value for a string", v, err)
		}
		k = key
		m[k] = x
	} else {
		m[k] = val
	}
	return nil
}
