// Package bus is the NATS layer of Lovia Fleet: subject, stream and bucket
// names, codecs, provisioning, and publishing and tailing run events. It
// implements the wire contract of docs/protocol.md and knows nothing of agent
// semantics: it moves the loop's events and entries (package loop) without
// interpreting them. It is a client of NATS only; the embedded server and
// the in-process cluster for development and tests are package broker.
//
// # Names
//
// Every subject, stream, consumer and bucket name derives from one prefix
// ("lovia" by default) through a [Names] value: [Names.Submit] gives
// lovia.submit.<agent>, [Names.Events] lovia.events.<run_id>,
// [Names.RunAPI] lovia.api.run.<run_id>.<op>, [Names.RunsStream]
// LOVIA_RUNS, [Names.SessionsBucket] lovia_sessions, and so on. Builders
// refuse identifiers that cannot be subject tokens ([ValidateID]: 1–128
// characters of [A-Za-z0-9_-]) with a [*FieldError] that names the field
// and matches [ErrInvalidToken] and [ErrInvalidRequest].
//
//	names, _ := bus.NewNames("lovia")
//	subj, err := names.Events(runID) // "lovia.events.<run_id>", or an error naming run_id
//
// # Encodings
//
// Bodies are JSON or msgpack with the same snake_case field names
// ([Encoding]). [EncodingOf] picks one from the Content-Type header or, when
// there is none, by sniffing the first byte; [Decode], [DecodeRunRequest],
// [DecodeEnvelope], [DecodeEntries] and [DecodeControl] detect, decode and
// validate in one call and return the encoding that replies should use.
// Decoding arbitrary bytes never panics and never allocates more than the
// body justifies: msgpack is checked before it is decoded (lengths, depth,
// no extension types), and every decoder is fuzzed.
//
// The bodies are [RunRequest] (input as a string or a list of {role,
// content}, see [Input]), the event [Envelope] {run_id, seq, type, time,
// agent, turn, data}, transcript entries ([MarshalEntries]), and the
// request/reply bodies of the api subjects ([ApproveRequest],
// [StatusReply], [SubmitReply], [ErrorReply], …). An event's data is the
// JSON or msgpack encoding of the loop's event struct; [Envelope.Event]
// decodes it back into that struct ([RunStarted] and [RunResumed] add the
// worker-level fields the wire contract gives run_started and run_resumed).
// [Envelope.MarshalAs] transcodes an event between encodings, and
// json.Marshal of an [*Envelope] prints it as JSON whatever its encoding.
//
// # Provisioning
//
// [Provision] creates or updates, idempotently, the RUNS work-queue stream,
// the EVENTS stream (limits retention, max age, per-run cap, direct get),
// the KV buckets (with atomic batch publish enabled) and the workers
// consumer, from a [ProvisionConfig] with documented defaults. Every process
// may call it at startup. Settings the server cannot change in place, such
// as a stream's retention, stop it with an [*IncompatibleError]
// ([ErrIncompatibleStream]) that names the stream and the differences.
//
//	if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3}); err != nil {
//		return err // e.g. "bus: stream LOVIA_RUNS exists with incompatible settings (retention: …)"
//	}
//
// # Publishing events
//
// A [Publisher] serves a process; [Publisher.Open] returns a [RunPublisher]
// for one run that continues after the last stored event, so a worker that
// resumes a run continues its seq without gaps or duplicates. Events are
// published asynchronously with at most [PublisherConfig.MaxPending] in
// flight, with the headers Nats-Msg-Id (<run_id>.<seq>, so a retried
// publish is stored once), Lovia-Event, Lovia-Seq and Content-Type.
// [RunPublisher.Flush] waits for every ack: call it at checkpoints and
// after the terminal event. Failed publishes are retried in seq order; when
// retries run out the run publisher returns [ErrPublish] from then on.
//
//	run, err := pub.Open(ctx, runID, req.EventEncoding(arrived))
//	seq, err := run.Publish(ctx, ev) // ev is a loop.Event
//	err = run.Flush(ctx)             // before writing the checkpoint
//
// Publishes go through a [JetStreamPublisher]: messages to JetStream on the
// core connection, one reply subscription, and the server's acks read by
// hand (what it does not recognise goes to encoding/json), with the
// outcomes jetstream.PublishMsg gives for the same replies — the ack, its
// API errors and sentinels. [NewJetStreamPublisher] makes one; the store
// uses its own for checkpoints and the run index, and [Publisher]'s
// [Publisher.PublishRequest] publishes run requests on it.
//
// # Tailing a run
//
// [Tailer.Tail] reads one run's events through one ephemeral ordered
// consumer (never a durable one per viewer; [Tail.Close] deletes it). It
// starts at the first event ([FromStart], the default), at a seq
// ([FromSeq], e.g. after an SSE Last-Event-ID) or at the next stored event
// ([Live]), and ends with io.EOF after the first terminal event it
// delivers, unless [Follow] is given (a failed run resubmitted under the
// same id appends another attempt with its own terminal event). It returns
// decoded envelopes in seq order, each seq once.
//
//	tail, err := tailer.Tail(ctx, runID, bus.FromSeq(lastSeen+1))
//	defer tail.Close(ctx)
//	for env, err := range tail.All(ctx) { … }
//
// # Errors
//
// errors.go lists the sentinels. Decoding errors are [*DecodeError]
// ([ErrMalformed], [ErrUnknownEncoding], [ErrUnknownEventType]); contract
// violations are [*FieldError] ([ErrInvalidRequest]); [ErrorFor] turns any
// of them into the {"error": {type, message, hint}} body of a reply, and
// [DecodeReply] turns such a reply back into an [*APIError]. Backend errors
// stay in the chain, so callers can also match nats' and jetstream's
// sentinels. Every network call has a deadline: the caller's, or the
// configured Timeout.
package bus
