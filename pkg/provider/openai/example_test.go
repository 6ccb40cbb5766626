package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// A keyless local server (here a stand-in for Ollama or vLLM) streaming a
// chat completion; the provider turns its chunks into deltas.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"llama3","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}

data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"llama3","choices":[{"index":0,"delta":{"content":" there!"},"finish_reason":"stop"}]}

data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"llama3","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":8}}}

data: [DONE]

`)
	}))
	defer srv.Close()

	p, err := openai.New(openai.Config{Model: "llama3", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &loop.ModelRequest{Entries: []loop.Entry{loop.SystemText("Be brief."), loop.UserText("Hi!")}}
	err = p.Stream(context.Background(), req, func(d loop.Delta) error {
		switch d.Kind {
		case loop.DeltaText:
			fmt.Printf("text %q\n", d.Text)
		case loop.DeltaUsage:
			fmt.Printf("usage in=%d (cached %d) out=%d\n", d.Usage.InputTokens, d.Usage.CacheReadTokens, d.Usage.OutputTokens)
		case loop.DeltaFinish:
			fmt.Println("finish", d.Finish)
		}
		return nil
	})
	fmt.Println("err", err)
	// Output:
	// text "Hello"
	// text " there!"
	// usage in=9 (cached 8) out=3
	// finish stop
	// err <nil>
}
