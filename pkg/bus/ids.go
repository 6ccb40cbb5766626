package bus

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
)

// NewRunID returns a fresh run id: a ULID in lower case, so ids sort by
// creation time and are valid subject tokens.
func NewRunID() string { return strings.ToLower(ulid.Make().String()) }

// RawSubmitRunID is the run id of a request published straight to
// <p>.submit.<agent> (docs/protocol.md#submitting-by-raw-publish): the
// body's run_id, else the Nats-Msg-Id header, else a schedule fire's
// ScheduledRunID, else "run-<stream seq>". The
// result is validated.
func RawSubmitRunID(req *RunRequest, h nats.Header, streamSeq uint64) (string, error) {
	id := req.RunID
	field := "run_id"
	if id == "" {
		id = headerValue(h, HeaderMsgID)
		field = HeaderMsgID
	}
	if id == "" {
		id = ScheduledRunID(h) // a schedule's fire: sched-<name>-<unix>
	}
	if id == "" {
		id = "run-" + strconv.FormatUint(streamSeq, 10)
	}
	if err := ValidateID(field, id); err != nil {
		return "", err
	}
	return id, nil
}

// headerValue returns the first value of key, matching the key's case
// exactly first and then case-insensitively (nats.Header keys are
// case-sensitive; clients in other languages do not all agree on case).
func headerValue(h nats.Header, key string) string {
	if h == nil {
		return ""
	}
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}
