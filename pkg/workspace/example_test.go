package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/workspace"
)

// A session's tree: write, edit, list and grep, as the workspace tools
// do; an edit whose text is not in the file is refused with what to do.
func Example() {
	dir, _ := os.MkdirTemp("", "workspace-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(context.Background())
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)

	ctx := context.Background()
	st, _ := workspace.New(workspace.Config{JetStream: js})
	tree, _ := st.Tree(workspace.Scope{Kind: workspace.BySession, ID: "chat-1"}, workspace.Limits{})
	_, _ = tree.Write(ctx, "notes/todo.md", []byte("- buy milk\n- call Ada\n"))
	e, _ := tree.Edit(ctx, "notes/todo.md", "buy milk", "buy oat milk")
	fmt.Println(e.Path, e.Size, "bytes, revision", e.Revision)

	items, _ := tree.List(ctx, ".", nil)
	fmt.Printf("%s dir=%v files=%d\n", items[0].Name, items[0].Dir, items[0].Files)

	ms, _, _ := tree.Grep(ctx, regexp.MustCompile(`Ada`), "", 0, nil)
	fmt.Printf("%s:%d: %s\n", ms[0].Path, ms[0].Line, ms[0].Text)

	_, err = tree.Edit(ctx, "notes/todo.md", "buy bread", "buy rye")
	fmt.Println(errors.Is(err, workspace.ErrNoMatch), err)
	// Output:
	// notes/todo.md 26 bytes, revision 2
	// notes dir=true files=1
	// notes/todo.md:2: - call Ada
	// true edit: the text to replace is not in notes/todo.md: read the file again and copy the exact text, white space included
}
