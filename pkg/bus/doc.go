// Package bus is the NATS layer of Lovia Fleet: subject, stream and bucket
// names, codecs, provisioning, an embedded server for development and tests,
// and publishing and tailing run events. It knows nothing of agent semantics.
package bus
