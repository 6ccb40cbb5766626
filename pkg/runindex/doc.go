// Package runindex is the fleet's run listing: an in-memory index of every
// run, fed by a watch of the run index bucket, that answers filtered,
// paginated listings — newest first — in microseconds at 100,000 runs.
//
// # Why in memory
//
// The run index bucket (store.Runs) holds one key per run. Listing its
// keys is not an index: it reads every record, and a filter or a page
// costs as much as the whole bucket. Keeping a second, sorted structure in
// the bucket would add a write to every run transition, on the fleet's hot
// path. Instead, a [Feed] replays the bucket once (one ordered consumer,
// each record decoded without its result, metadata or history) and then
// follows every change; the listing adds no write and no read to any run.
// Every process that runs a Feed answers the same listing, a few
// milliseconds behind the bucket at most.
//
// # The structure
//
// An [Index] keeps each run's summary in one set ordered by (created_at,
// run_id) — a sorted slice, to which a new run is appended — and, with the
// same order, a set per status, agent, session, worker and parent run, and
// the set of runs that may be waiting for a decision. A [Query] walks the
// smallest set its filters name, newest first, from its cursor (the key
// of the last run of the previous page, so pages neither skip nor repeat
// runs while new ones arrive); a time range is a binary search. Counts by
// status, over every filter but the status one, come from the status sets
// when no other filter is given, and from the walk otherwise.
//
// # What a run awaits
//
// A worker stores a gated call's approval deadline (<run>.ask.<call>) when
// its wait begins, and the API stores the decision (<run>.ap.<call>): the
// index follows both keys, so a run is listed as awaiting from the first
// second of its wait until the decision, its deadline or its end. A
// parked run's record names its call. The tool and the ask_human question
// are in the run's events, not the bucket: [Index.SetCallInfo] caches them
// once a reader has looked them up.
//
// # Cost
//
// BenchmarkRunsList, BenchmarkRunsIndexBuild and BenchmarkRunsIndexReplay
// measure it (BENCHMARKS.md, "Runs list"). A purge of a run's keys
// (store.Runs.Delete) leaves no marker a watch sees: the run stays listed
// until the index is built again.
package runindex
