package broker_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
)

// Example starts an in-process JetStream server, connects to it without a
// network listener, and stores a message in a stream.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dir, _ := os.MkdirTemp("", "lovia-broker-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1}) // in-process only
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	nc, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer nc.Close()

	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HELLO", Subjects: []string{"hello.>"}}); err != nil {
		panic(err)
	}
	ack, err := js.Publish(ctx, "hello.world", []byte("hi"))
	if err != nil {
		panic(err)
	}
	fmt.Println(ack.Stream, ack.Sequence)
	// Output:
	// HELLO 1
}

// ExampleStartEmbedded shows that a bad config names the field to fix.
func ExampleStartEmbedded() {
	_, err := broker.StartEmbedded(broker.EmbeddedConfig{})
	fmt.Println(err)
	// Output:
	// broker: invalid config: StoreDir: is required
}
