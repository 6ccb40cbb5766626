#!/usr/bin/env bash
# bench-scale: the fleet at scale on this machine, in one step. Real
# processes: a nats-server built from the module (one server, file store),
# `lovia worker` processes, runs raw-published to an agent whose script
# makes an echo call, then a sleep call long enough to outlast the
# benchmark (a run waiting on a slow model or tool). Phases (PHASES):
#
#   live  LIVE runs (default 50000) on one worker: time from the first
#         publish until every run is in its sleep, worker and server RSS
#   fo1   N runs (default 10000) on one worker, killed with SIGKILL, a
#         fresh worker started at once: time from the kill to each run's
#         run_resumed (first, p50, p90, max), resumes/s, RSS after
#   fo3   the same with three survivors, idle before the kill
#
# Each failover checks that every run resumed exactly once and that no run
# ran its checkpointed echo call again. Each phase starts its own server.
#
#   make bench-scale
#   PHASES='fo1 fo3' N=10000 ./scripts/bench-scale.sh
#   LIVE=50000 PHASES=live ./scripts/bench-scale.sh
set -euo pipefail
GO=${GO:-go}
PHASES=${PHASES:-live fo1 fo3}
export N=${N:-10000} LIVE=${LIVE:-50000}
cd "$(dirname "$0")/.."
run() { # test, env... -> the figure rows
	local test=$1
	shift
	env "$@" $GO test -tags scale -count=1 -timeout 60m -run "^$test\$" -v ./test/scale/ >"$log" 2>&1 || {
		tail -60 "$log"
		echo "bench-scale: $test failed (log above)" >&2
		return 1
	}
	grep '^SCALE | ' "$log" | sed 's/^SCALE | //'
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "bench-scale on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for p in $PHASES; do
	case $p in
	live) run TestLive ;;
	fo1) run TestFailover SURVIVORS=1 FRESH=1 ;;
	fo3) run TestFailover SURVIVORS=3 FRESH=0 ;;
	*) echo "bench-scale: unknown phase $p (live, fo1, fo3)" >&2; exit 2 ;;
	esac
done
