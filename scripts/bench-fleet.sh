#!/usr/bin/env bash
# bench-fleet: the fleet's throughput against the broker's bound, measured
# side by side. BenchmarkRawMix (a plain client doing only the messages a
# run needs) and BenchmarkFleetRuns (the fleet doing those runs) run
# alternately, PAIRS times, from one test binary on this machine, and each
# pair's ratio fleet/raw is printed: the comparison never spans two
# machines or two moments.
#
#   PAIRS=5 RUNS=2000 ./scripts/bench-fleet.sh
set -euo pipefail
PAIRS=${PAIRS:-5}
RUNS=${RUNS:-2000}
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO test -c -o "$tmp/worker.test" ./pkg/worker/
bench() { # name -> "runs/s allocs/op B/op"
	"$tmp/worker.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "${RUNS}x" -test.benchmem |
		awk -v n="$1" '$1 ~ "^"n {for (i=2;i<=NF;i++){if($(i)=="runs/s")r=$(i-1); if($(i)=="allocs/op")a=$(i-1); if($(i)=="B/op")m=$(i-1)}} END {if (r=="") exit 1; print r, a, m}'
}
printf '%-5s %12s %12s %7s %14s %14s\n' pair raw_runs/s fleet_runs/s ratio raw_allocs/op fleet_allocs/op
ratios=()
for i in $(seq 1 "$PAIRS"); do
	read -r raw rawa _ < <(bench BenchmarkRawMix)
	read -r fleet fleeta _ < <(bench BenchmarkFleetRuns)
	ratio=$(awk -v f="$fleet" -v r="$raw" 'BEGIN {printf "%.2f", f/r}')
	ratios+=("$ratio")
	printf '%-5s %12s %12s %7s %14s %14s\n' "$i" "$raw" "$fleet" "$ratio" "$rawa" "$fleeta"
done
printf 'ratio fleet/raw over %s pairs: %s\n' "$PAIRS" "$(printf '%s\n' "${ratios[@]}" | sort -n | tr '\n' ' ')"
