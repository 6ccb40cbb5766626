// Package fleet is the registry of a fleet's live workers: each worker
// announces itself and the agents it serves in a KV bucket
// (bus.Names.FleetBucket, key w.<worker>) and refreshes the announcement
// while it lives; the API reads it to accept a submit for an agent that
// some live worker serves — the same answer on every API instance,
// whichever process it runs in — and to say, for a queued run, that no
// worker serves its agent.
//
// # Liveness
//
// An announcement carries the time it was made; one older than
// [Registry] TTL (three refresh intervals) is a worker that died without
// withdrawing (a kill -9) and is ignored. A worker withdraws on Stop.
//
//	reg, _ := fleet.Ensure(ctx, js, names, 1)
//	ann := fleet.NewAnnouncer(reg, fleet.Member{Worker: "w1", Agents: infos}, 2*time.Second, log)
//	_ = ann.Start(ctx)
//	defer ann.Stop(ctx)
//	view := fleet.NewView(reg, time.Second)
//	ok, _ := view.Serves(ctx, "support")
//
// # One process per worker id
//
// The bucket also holds each worker id's [Lease] (key id.<worker>): the
// one process that holds the id. [Registry.CreateLease] takes a free id,
// [Registry.TakeLease] replaces a lease at the revision read (a takeover
// from a dead holder, or the holder's own confirmation) and
// [Registry.ReleaseLease] frees it; pkg/worker runs the protocol.
package fleet
