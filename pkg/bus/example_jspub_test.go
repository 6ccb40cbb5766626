package bus_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// ExampleJetStreamPublisher publishes to a stream on a core connection:
// the ack comes back as jetstream.PublishMsg returns it, and a refused
// expectation fails with the same API error.
func ExampleJetStreamPublisher() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, _ := os.MkdirTemp("", "lovia-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
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
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		panic(err)
	}

	pub := bus.NewJetStreamPublisher(nc) // share it among a connection's users
	ack, err := pub.PublishMsg(ctx, &nats.Msg{Subject: "orders.1", Data: []byte("one")})
	if err != nil {
		panic(err)
	}
	fmt.Println(ack.Stream, ack.Sequence)

	// A compare-and-set on the subject's last sequence, lost.
	_, err = pub.PublishMsg(ctx, &nats.Msg{Subject: "orders.1", Data: []byte("two"), Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: {strconv.Itoa(7)},
	}})
	var apiErr *jetstream.APIError
	fmt.Println(errors.As(err, &apiErr), apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
	// Output:
	// ORDERS 1
	// true true
}
