package bus_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// FuzzAckParser: whatever a reply holds, the ack parser's outcome is
// json.Unmarshal's (the hand parser reads it, or hands it on).
func FuzzAckParser(f *testing.F) {
	for _, s := range []string{
		`{"stream":"S","seq":1}`,
		`{"stream":"S","domain":"hub","seq":2,"duplicate": true}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"S","seq":0}`,
		`{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"S","seq":0}`,
		`{"stream":"S","seq":1,"val":"3"}`,
		`{"stream":"S\u00e9","seq":01}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ack, err, _ := bus.ParseAckForTest(b)
		refAck, refErr := referenceAck(b)
		requireSameOutcome(t, string(b), refAck, refErr, ack, err)
	})
}
