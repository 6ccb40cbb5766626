package bus

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// MarshalEntries encodes transcript entries as a list ({kind, …} each,
// docs/protocol.md#transcript-entries).
func MarshalEntries(enc Encoding, entries []loop.Entry) ([]byte, error) {
	if entries == nil {
		entries = []loop.Entry{}
	}
	return Marshal(enc, entries)
}

// UnmarshalEntries decodes a list of entries in enc and validates each.
// Errors match ErrMalformed, or ErrInvalidRequest (a *FieldError naming
// the entry, "entries[3]") for an entry of an unknown kind or without its
// required fields.
func UnmarshalEntries(enc Encoding, data []byte) ([]loop.Entry, error) {
	var entries []loop.Entry
	if err := Unmarshal(enc, data, &entries); err != nil {
		return nil, &DecodeError{What: "entries", Encoding: enc, Err: err}
	}
	if err := validateEntries("entries", entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// DecodeEntries detects the encoding of a list of entries (see EncodingOf)
// and decodes it with UnmarshalEntries.
func DecodeEntries(h nats.Header, body []byte) ([]loop.Entry, Encoding, error) {
	enc, err := EncodingOf(h, body)
	if err != nil {
		return nil, "", &DecodeError{What: "entries", Err: err}
	}
	entries, err := UnmarshalEntries(enc, body)
	return entries, enc, err
}

func validateEntries(field string, entries []loop.Entry) error {
	for i := range entries {
		if err := entries[i].Validate(); err != nil {
			return &FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Reason: err.Error()}
		}
	}
	return nil
}
