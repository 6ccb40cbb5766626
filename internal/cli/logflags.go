package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// serverCommand reports the long-lived commands, which define
// --log-level and --log-format themselves.
func serverCommand(cmd string) bool {
	switch cmd {
	case "dev", "worker", "gateway":
		return true
	}
	return false
}

// clientLogFlags takes --log-format and --log-level out of a one-shot
// command's arguments, so that `lovia --log-format json workers` works
// as it does for a worker: a one-shot command writes no logs, and with
// --log-format json its messages on stderr (its errors) are JSON lines.
// It returns the arguments left and a usage error for a bad value.
func clientLogFlags(env *Env, cmd string, args []string) ([]string, error) {
	if serverCommand(cmd) {
		if serverLogFormat(env, args) == "json" {
			// Its logs are JSON already; what it prints besides (a
			// fatal start-up error, its banner) becomes JSON too.
			env.Stderr = &jsonLineWriter{w: env.Stderr}
		}
		return args, nil
	}
	out := make([]string, 0, len(args))
	format := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "log-format" && name != "log-level" {
			out = append(out, a)
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		switch {
		case name == "log-level":
			// Nothing to log at any level; accepted as a worker takes it.
		case value == "json" || value == "text":
			format = value
		default:
			return nil, fmt.Errorf("--log-format %q: use text or json", value)
		}
	}
	if format == "json" {
		env.Stderr = &jsonLineWriter{w: env.Stderr}
	}
	return out, nil
}

// serverLogFormat is the --log-format a long-lived command is given (the
// last one), else $LOVIA_LOG_FORMAT.
func serverLogFormat(env *Env, args []string) string {
	f := env.Getenv("LOVIA_LOG_FORMAT")
	for i, a := range args {
		if a == "--" {
			break
		}
		switch {
		case a == "--log-format" || a == "-log-format":
			if i+1 < len(args) {
				f = args[i+1]
			}
		case strings.HasPrefix(a, "--log-format=") || strings.HasPrefix(a, "-log-format="):
			_, f, _ = strings.Cut(a, "=")
		}
	}
	return f
}

// jsonLineWriter writes each line written to it as a JSON log line
// {time, level, msg}: ERROR for the CLI's "lovia: …" errors, INFO for the
// rest; a line that is a JSON object already (a log record) is written
// as it is.
type jsonLineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (j *jsonLineWriter) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf.Write(p)
	for {
		line, err := j.buf.ReadString('\n')
		if err != nil {
			j.buf.WriteString(line) // an unfinished line waits for its end
			return len(p), nil
		}
		line = strings.TrimRight(line, "\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "{") && json.Valid([]byte(line)) {
			if _, err := j.w.Write([]byte(line + "\n")); err != nil {
				return 0, err
			}
			continue
		}
		level := "INFO"
		if strings.HasPrefix(line, "lovia: ") {
			level = "ERROR"
		}
		b, _ := json.Marshal(map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "level": level, "msg": line})
		if _, err := j.w.Write(append(b, '\n')); err != nil {
			return 0, err
		}
	}
}
