package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
)

// A compatible host streaming a message with a thinking block: the
// thinking streams as reasoning deltas and ends as a reasoning entry whose
// signature the next request sends back.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":12,"cache_read_input_tokens":100,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Greet back."}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2lnbmF0dXJl"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello!"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":1}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":8}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
		}
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &loop.ModelRequest{Entries: []loop.Entry{loop.SystemText("Be brief."), loop.UserText("Hi!")}}
	err = p.Stream(context.Background(), req, func(d loop.Delta) error {
		switch d.Kind {
		case loop.DeltaReasoning:
			fmt.Printf("reasoning %q\n", d.Text)
		case loop.DeltaEntry:
			fmt.Printf("entry %s signature=%s provider=%s\n", d.Entry.Kind, d.Entry.Signature, d.Entry.Provider)
		case loop.DeltaText:
			fmt.Printf("text %q\n", d.Text)
		case loop.DeltaUsage:
			fmt.Printf("usage in=%d (cache read %d) out=%d\n", d.Usage.InputTokens, d.Usage.CacheReadTokens, d.Usage.OutputTokens)
		case loop.DeltaFinish:
			fmt.Println("finish", d.Finish)
		}
		return nil
	})
	fmt.Println("err", err)
	// Output:
	// reasoning "Greet back."
	// entry reasoning signature=c2lnbmF0dXJl provider=anthropic
	// text "Hello!"
	// usage in=112 (cache read 100) out=8
	// finish stop
	// err <nil>
}
