package bus

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ackReply is what the server's reply to a publish says: an ack, or the
// API error that refused the message.
type ackReply struct {
	ack    jetstream.PubAck
	apiErr *jetstream.APIError
}

// parseAck reads the server's reply to a JetStream publish the way
// jetstream.PublishMsg does (an API error first; an ack without a stream
// name, or a reply that does not decode, is jetstream.ErrInvalidJSAck). The
// replies the server writes — {"stream":"S","seq":N} with "domain" and
// "duplicate": true, and {"error":{"code":C,"err_code":E,"description":"…"}}
// — are read by hand; anything else (an unknown key, an escape in a string,
// a key twice) goes to encoding/json, so the hand parser never decides what
// it does not know. names interns stream and domain names.
func parseAck(b []byte, names *nameCache) (ackReply, error) {
	r, ok := scanAck(b, names)
	if !ok {
		return jsonAck(b)
	}
	switch {
	case r.apiErr != nil:
		return ackReply{apiErr: r.apiErr}, nil
	case r.ack.Stream == "":
		return ackReply{}, jetstream.ErrInvalidJSAck
	}
	return r, nil
}

// jsonAck decodes b as jetstream.PublishMsg does.
func jsonAck(b []byte) (ackReply, error) {
	var resp struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return ackReply{}, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return ackReply{apiErr: resp.Error}, nil
	}
	if resp.PubAck == nil || resp.Stream == "" {
		return ackReply{}, jetstream.ErrInvalidJSAck
	}
	return ackReply{ack: *resp.PubAck}, nil
}

// err is the reply's error as the jetstream package returns it: the API
// error (wrapped as jetstream.PublishMsg wraps it when sync), or nil.
func (r ackReply) err(sync bool) error {
	switch {
	case r.apiErr == nil:
		return nil
	case sync:
		return fmt.Errorf("nats: %w", r.apiErr)
	}
	return r.apiErr
}

// nameCache holds the few stream and domain names a publisher sees, so
// that reading one from an ack allocates only the first time.
type nameCache struct{ names [4]string }

// get returns b as a string, from the cache when it is there.
func (c *nameCache) get(b []byte) string {
	for _, s := range c.names {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	copy(c.names[1:], c.names[:len(c.names)-1])
	c.names[0] = s
	return s
}

// ackScanner is the hand parser's cursor.
type ackScanner struct {
	b []byte
	i int
}

// scanAck parses the replies the server writes; ok is false for anything
// else.
func scanAck(b []byte, names *nameCache) (r ackReply, ok bool) {
	s := ackScanner{b: b}
	var seen [5]bool // stream, seq, duplicate, domain, error
	if !s.byte('{') {
		return r, false
	}
	if s.peek('}') {
		s.i++
		return r, s.end()
	}
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return r, false
		}
		var k int
		switch string(key) {
		case "stream":
			v, ok := s.str()
			if !ok {
				return r, false
			}
			r.ack.Stream = names.get(v)
		case "seq":
			k = 1
			n, ok := s.uint()
			if !ok {
				return r, false
			}
			r.ack.Sequence = n
		case "duplicate":
			k = 2
			v, ok := s.boolean()
			if !ok {
				return r, false
			}
			r.ack.Duplicate = v
		case "domain":
			k = 3
			v, ok := s.str()
			if !ok {
				return r, false
			}
			r.ack.Domain = names.get(v)
		case "error":
			k = 4
			e, ok := s.apiError()
			if !ok {
				return r, false
			}
			r.apiErr = e
		default:
			return r, false
		}
		if seen[k] {
			return r, false
		}
		seen[k] = true
		if s.peek(',') {
			s.i++
			continue
		}
		if !s.byte('}') {
			return r, false
		}
		return r, s.end()
	}
}

// apiError parses {"code":C,"err_code":E,"description":"…"}, each key at
// most once.
func (s *ackScanner) apiError() (*jetstream.APIError, bool) {
	e := &jetstream.APIError{}
	var seen [3]bool
	if !s.byte('{') {
		return nil, false
	}
	if s.peek('}') {
		s.i++
		return e, true
	}
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return nil, false
		}
		var k int
		switch string(key) {
		case "code":
			n, ok := s.uint()
			if !ok || n > 1<<31-1 {
				return nil, false
			}
			e.Code = int(n)
		case "err_code":
			k = 1
			n, ok := s.uint()
			if !ok || n > 1<<16-1 {
				return nil, false
			}
			e.ErrorCode = jetstream.ErrorCode(n)
		case "description":
			k = 2
			v, ok := s.str()
			if !ok {
				return nil, false
			}
			e.Description = string(v)
		default:
			return nil, false
		}
		if seen[k] {
			return nil, false
		}
		seen[k] = true
		if s.peek(',') {
			s.i++
			continue
		}
		return e, s.byte('}')
	}
}

// ws skips JSON whitespace.
func (s *ackScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c after whitespace.
func (s *ackScanner) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek reports whether c comes next after whitespace, consuming nothing
// but the whitespace.
func (s *ackScanner) peek(c byte) bool {
	s.ws()
	return s.i < len(s.b) && s.b[s.i] == c
}

// end reports whether nothing but whitespace is left.
func (s *ackScanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// str reads a string of printable ASCII without escapes (its bytes,
// unquoted); anything else is not ok.
func (s *ackScanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// uint reads a JSON number that is an unsigned integer of at most 19
// digits, without a leading zero, fraction or exponent.
func (s *ackScanner) uint() (uint64, bool) {
	s.ws()
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 19 || digits > 1 && s.b[start] == '0' {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// boolean reads true or false.
func (s *ackScanner) boolean() (bool, bool) {
	s.ws()
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}
