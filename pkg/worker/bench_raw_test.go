package worker_test

import (
	"context"
	"fmt"
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
	benchRawMix(b, func(m *rawMix) rawSubmit { return m.publish })
}

// BenchmarkRawMixAPI is BenchmarkRawMix with each run submitted as the
// fleet's API submits it, by a plain responder: the client's request to
// the responder (on the client's connection, as in fleettest), the run
// record's create in the runs bucket, the request's publish into the
// runs stream, and the reply — the messages an API-submitted run
// (BenchmarkFleetRuns) needs on top of BenchmarkRawMix's. The responder
// serves each request on a goroutine of its own, as service.Service does.
func BenchmarkRawMixAPI(b *testing.B) {
	benchRawMix(b, func(m *rawMix) rawSubmit {
		record := make([]byte, 190) // a queued run record
		reply := make([]byte, 130)  // a submit reply
		const subject = "rawmix.api.submit"
		sub, err := m.f.Conn.QueueSubscribe(subject, "rawmix", func(msg *nats.Msg) {
			go func() {
				ctx := context.Background()
				id := string(msg.Data)
				_, err := m.runs.Create(ctx, id+".rec", record)
				if err == nil {
					err = m.publish(ctx, id)
				}
				if err != nil {
					_ = msg.Respond([]byte("error: " + err.Error()))
					return
				}
				_ = msg.Respond(reply)
			}()
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sub.Unsubscribe() })
		return func(ctx context.Context, id string) error {
			rep, err := m.f.Conn.RequestWithContext(ctx, subject, []byte(id))
			if err != nil {
				return err
			}
			if len(rep.Data) != len(reply) {
				return fmt.Errorf("submit %s: %s", id, rep.Data)
			}
			return nil
		}
	})
}

// rawMix is what a raw mix's runs share: the fleet (its server and the
// submitter's connection), the worker's connection and the buckets.
type rawMix struct {
	f                                  *fleettest.Fleet
	cjs, wjs                           jetstream.JetStream
	cons                               jetstream.Consumer
	ckpt, runs                         jetstream.KeyValue
	submit                             string
	request, event, checkpoint, status []byte
}

// rawSubmit puts the run id into the runs stream.
type rawSubmit func(ctx context.Context, id string) error

// publish puts the run's request into the runs stream, from the
// submitter's connection.
func (m *rawMix) publish(ctx context.Context, id string) error {
	_, err := m.cjs.Publish(ctx, m.submit, m.request, jetstream.WithMsgID(id))
	return err
}

// benchRawMix runs b.N raw runs, rawMixInFlight at a time, each submitted
// by the function submitter returns.
func benchRawMix(b *testing.B, submitter func(*rawMix) rawSubmit) {
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
	m := &rawMix{f: f, cjs: f.JS,
		event:      make([]byte, 180), // about a scripted run's event
		checkpoint: make([]byte, 600), // a model turn's entries and head
		status:     make([]byte, 300), // a run record
		request:    make([]byte, 120), // a run request
	}
	if m.cons, err = f.JS.Consumer(ctx, names.RunsStream(), cname); err != nil {
		b.Fatal(err)
	}
	if m.submit, err = names.Submit("calc"); err != nil {
		b.Fatal(err)
	}
	// The submitter and the worker each have a connection, like the
	// fleet's client and workers.
	if m.wjs, err = jetstream.New(f.Connect()); err != nil {
		b.Fatal(err)
	}
	if m.ckpt, err = m.wjs.KeyValue(ctx, store.DefaultCheckpointBucket); err != nil {
		b.Fatal(err)
	}
	if m.runs, err = m.wjs.KeyValue(ctx, store.DefaultRunBucket); err != nil {
		b.Fatal(err)
	}
	submit := submitter(m)
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
				if err := submit(ctx, id); err != nil {
					b.Error(err)
					return
				}
				if err := m.run(ctx, id); err != nil {
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

// run is one submitted run's messages: fetch, events, checkpoints,
// status, ack.
func (m *rawMix) run(ctx context.Context, id string) error {
	batch, err := m.cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		return err
	}
	var req jetstream.Msg
	for got := range batch.Messages() {
		req = got
	}
	if req == nil {
		return batch.Error()
	}
	subject := "lovia.events." + id
	futs := make([]jetstream.PubAckFuture, 0, rawMixEvents)
	for seq := 1; seq <= rawMixEvents; seq++ {
		ev := &nats.Msg{Subject: subject, Data: m.event, Header: nats.Header{jetstream.MsgIDHeader: {id + "." + strconv.Itoa(seq)}}}
		fut, err := m.wjs.PublishMsgAsync(ev)
		if err != nil {
			return err
		}
		futs = append(futs, fut)
		if seq == 5 || seq == 10 {
			// A checkpoint per model turn, between the turn's events.
			if _, err := m.ckpt.Put(ctx, id+".c."+strconv.Itoa(seq), m.checkpoint); err != nil {
				return err
			}
		}
	}
	if _, err := m.runs.Put(ctx, id+".rec", m.status); err != nil {
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
	return req.DoubleAck(ctx)
}
