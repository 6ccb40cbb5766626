package bus

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// RecordStamp is what HeaderRecord carries: the KV revision a first
// submission's run record was created at, and its creation time. With the
// request, it is all a claim needs to rebuild the record the API stored.
// On the wire: "<revision> <created, Unix nanoseconds>", both in decimal.
type RecordStamp struct {
	Revision uint64
	Created  time.Time
}

// IsZero reports whether s names no record.
func (s RecordStamp) IsZero() bool { return s.Revision == 0 }

// Set writes s to h as HeaderRecord; a zero s writes nothing.
func (s RecordStamp) Set(h nats.Header) {
	if s.IsZero() {
		return
	}
	h[HeaderRecord] = []string{strconv.FormatUint(s.Revision, 10) + " " + strconv.FormatInt(s.Created.UnixNano(), 10)}
}

// RecordStampOf reads HeaderRecord from h, in UTC; false when h has none or
// it is malformed.
func RecordStampOf(h nats.Header) (RecordStamp, bool) {
	rev, at, ok := strings.Cut(headerValue(h, HeaderRecord), " ")
	if !ok {
		return RecordStamp{}, false
	}
	r, err := strconv.ParseUint(rev, 10, 64)
	if err != nil || r == 0 {
		return RecordStamp{}, false
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil || n <= 0 {
		return RecordStamp{}, false
	}
	return RecordStamp{Revision: r, Created: time.Unix(0, n).UTC()}, true
}
