// Package broker is the embedded NATS server and in-process cluster that
// `lovia dev` and the tests run. Production fleets connect to a real NATS
// deployment instead; only binaries that embed a server link nats-server,
// so a program that only talks to a fleet (package client, package bus)
// stays small.
//
// # One server
//
// [StartEmbedded] runs a JetStream server in process and waits until it
// accepts connections. It listens on a random loopback port by default
// ([Embedded.ClientURL]), on a chosen port, or on nothing at all
// ([EmbeddedConfig.Port] -1), in which case [Embedded.Connect] opens an
// in-process connection. [Embedded.Shutdown] stops it within a context.
//
//	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
//	nc, err := srv.Connect()
//
// # A cluster on loopback
//
// [StartCluster] runs a JetStream cluster (3 nodes by default) whose nodes
// route to each other on 127.0.0.1, and waits until every node is healthy
// and the meta leader sees them all. Failover tests stop and start nodes
// with [Cluster.Kill] and [Cluster.Restart] (a node keeps its store, name
// and ports), find leaders with [Cluster.StreamLeader] and
// [Cluster.MetaLeader], and wait for the cluster to settle with
// [Cluster.WaitReady].
//
// # Errors
//
// A config field out of range is an error wrapping [ErrInvalidConfig] that
// names the field; no server is started.
package broker
