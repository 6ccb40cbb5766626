package toolsvc

import (
	"encoding/json"
	"time"
)

// record is a call's entry in the dedupe bucket: pending while the tool
// runs (with a lease another instance may take over after), then the reply.
type record struct {
	Done bool `json:"done"`
	// Args is the digest of the call's arguments (argsDigest): the same
	// run and call id with other arguments is another call, refused.
	Args string `json:"args,omitempty"`
	// Lease ends a pending record's claim on the call.
	Lease time.Time `json:"lease,omitzero"`
	// Body, Code and Description are the reply.
	Body        []byte `json:"body,omitempty"`
	Code        string `json:"code,omitempty"`
	Description string `json:"description,omitempty"`
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

func decodeRecord(b []byte) (record, bool) {
	var r record
	return r, json.Unmarshal(b, &r) == nil
}
