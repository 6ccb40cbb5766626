package service

import (
	"reflect"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// recordStamp is the stamp (bus.HeaderRecord) of e, the record a first
// submission's create has just stored for req, for the request whose
// encoded body is body: with it, the request's first claim rebuilds e
// (lifecycle.Submitted) and compare-and-sets it without reading it. It is
// zero — the claim reads the record — when e is stored in chunks, or when
// the claim could not rebuild e from the body: metadata that does not
// decode back to the same values (a msgpack integer sent in a wider type
// than it needs decodes, re-encoded, as another Go type).
func recordStamp(enc bus.Encoding, body []byte, req *bus.RunRequest, e *store.RunEntry) bus.RecordStamp {
	if e.Chunked() {
		return bus.RecordStamp{}
	}
	if len(req.Metadata) > 0 {
		var got struct {
			Metadata map[string]any `json:"metadata" msgpack:"metadata"`
		}
		if bus.Unmarshal(enc, body, &got) != nil || !reflect.DeepEqual(got.Metadata, req.Metadata) {
			return bus.RecordStamp{}
		}
	}
	return bus.RecordStamp{Revision: e.Revision, Created: e.Record.CreatedAt}
}
