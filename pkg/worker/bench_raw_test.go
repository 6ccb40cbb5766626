package worker_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// rawMixEvents and rawMixCheckpoints are the messages a BenchmarkFleetRuns
// run needs at the least: its 14 events, one checkpoint per model turn
// (two), and one status record.
const (
	rawMixEvents      = 14
	rawMixCheckpoints = 2
	rawMixInFlight    = 16
)

// BenchmarkRawMix is the broker's bound for BenchmarkFleetRuns: a plain
// nats.go client doing only the messages such a run needs — the request
// into the work-queue stream, one fetch and ack, 14 async event publishes
// (acks awaited once, at the end), 2 checkpoint KV puts and 1 status put —
// with 16 runs in flight, on the streams, buckets and agent consumer that
// bus.Provision, store.Open and bus.ProvisionAgents make for the fleet (the
// same embedded server, file storage). `make bench-fleet` runs it and
// BenchmarkFleetRuns alternately and prints their ratio.
func BenchmarkRawMix(b *testing.B) {
	f := fleettest.Start(b, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	if err := bus.ProvisionAgents(ctx, f.JS, bus.ProvisionConfig{}, []string{"calc"}, false); err != nil {
		b.Fatal(err)
	}
	names := bus.Names{}
	cname, err := names.AgentConsumer("calc")
	if err != nil {
		b.Fatal(err)
	}
	cons, err := f.JS.Consumer(ctx, names.RunsStream(), cname)
	if err != nil {
		b.Fatal(err)
	}
	submit, err := names.Submit("calc")
	if err != nil {
		b.Fatal(err)
	}
	// The submitter and the worker each have a connection, like the
	// fleet's client and workers.
	wjs, err := jetstream.New(f.Connect())
	if err != nil {
		b.Fatal(err)
	}
	ckpt, err := wjs.KeyValue(ctx, store.DefaultCheckpointBucket)
	if err != nil {
		b.Fatal(err)
	}
	runs, err := wjs.KeyValue(ctx, store.DefaultRunBucket)
	if err != nil {
		b.Fatal(err)
	}
	event := make([]byte, 180)      // about a scripted run's event
	checkpoint := make([]byte, 600) // a model turn's entries and head
	status := make([]byte, 300)     // a run record
	request := make([]byte, 120)    // a run request
	b.ReportAllocs()
	b.ResetTimer()
	sys := reportSyscalls(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range rawMixInFlight {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				id := "raw-" + strconv.FormatInt(n, 10)
				if err := rawMixRun(ctx, f.JS, wjs, cons, ckpt, runs, submit, id, request, event, checkpoint, status); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	sys()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// rawMixRun is one run's messages: submit, fetch, events, checkpoints,
// status, ack.
func rawMixRun(ctx context.Context, cjs, wjs jetstream.JetStream, cons jetstream.Consumer, ckpt, runs jetstream.KeyValue,
	submit, id string, request, event, checkpoint, status []byte) error {
	if _, err := cjs.Publish(ctx, submit, request, jetstream.WithMsgID(id)); err != nil {
		return err
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		return err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg == nil {
		return batch.Error()
	}
	subject := "lovia.events." + id
	futs := make([]jetstream.PubAckFuture, 0, rawMixEvents)
	for seq := 1; seq <= rawMixEvents; seq++ {
		m := &nats.Msg{Subject: subject, Data: event, Header: nats.Header{jetstream.MsgIDHeader: {id + "." + strconv.Itoa(seq)}}}
		fut, err := wjs.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		futs = append(futs, fut)
		if seq == 5 || seq == 10 {
			// A checkpoint per model turn, between the turn's events.
			if _, err := ckpt.Put(ctx, id+".c."+strconv.Itoa(seq), checkpoint); err != nil {
				return err
			}
		}
	}
	if _, err := runs.Put(ctx, id+".rec", status); err != nil {
		return err
	}
	for _, fut := range futs {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return msg.DoubleAck(ctx)
}
