// Package jsapi makes the JetStream API requests that nats.go's jetstream
// package does not offer in the form the fleet needs: a message get that
// always goes to the stream leader, even on a stream that allows direct
// gets (where nats.go would let any replica, possibly a lagging one,
// answer).
package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Msg is a stored message as $JS.API.STREAM.MSG.GET returns it.
type Msg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs"`
	Data    []byte    `json:"data"`
	Time    time.Time `json:"time"`
}

// Error is an error the JetStream API answered with.
type Error struct {
	Code        int                 `json:"code"`
	ErrCode     jetstream.ErrorCode `json:"err_code"`
	Description string              `json:"description"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
}

// StreamNotFound reports whether err is the API's "stream not found".
func StreamNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.ErrCode == jetstream.JSErrCodeStreamNotFound
}

// BySeq asks for the message stored at seq.
func BySeq(seq uint64) any {
	return struct {
		Seq uint64 `json:"seq"`
	}{seq}
}

// LastBySubject asks for the last message stored on subject (wildcards
// allowed: the last of every subject it matches).
func LastBySubject(subject string) any {
	return struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject}
}

// NextBySubject asks for the first message stored on subject (wildcards
// allowed) at seq or after it.
func NextBySubject(subject string, seq uint64) any {
	return struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{seq, subject}
}

// NextBySubjectSince asks for the first message stored on subject
// (wildcards allowed) at t or after it.
func NextBySubjectSince(subject string, t time.Time) any {
	return struct {
		StartTime time.Time `json:"start_time"`
		NextFor   string    `json:"next_by_subj"`
	}{t.UTC(), subject}
}

// LeaderGet asks the stream's leader for one message (req is BySeq,
// LastBySubject, NextBySubject or NextBySubjectSince). It returns nil, nil when the stream has no such message;
// the API's own errors are *Error.
func LeaderGet(ctx context.Context, js jetstream.JetStream, stream string, req any) (*Msg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	reply, err := js.Conn().RequestWithContext(ctx, APIPrefix(js)+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			err = fmt.Errorf("%w (is JetStream enabled?)", err)
		}
		return nil, err
	}
	var resp struct {
		Error   *Error `json:"error"`
		Message *Msg   `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("bad API response: %w", err)
	}
	if e := resp.Error; e != nil {
		if e.ErrCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		return nil, e
	}
	if resp.Message == nil {
		return nil, errors.New("API response without a message")
	}
	return resp.Message, nil
}

// APIPrefix is the JetStream API prefix js sends requests with.
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		if !strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix + "."
		}
		return o.APIPrefix
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}
