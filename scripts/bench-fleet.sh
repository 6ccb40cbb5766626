#!/usr/bin/env bash
# bench-fleet: the fleet's throughput against the broker's bound, measured
# side by side. BenchmarkRawMix (a plain client doing only the messages a
# run needs), BenchmarkFleetRuns (the fleet doing those runs, submitted
# through the NATS API) and BenchmarkFleetRawSubmit (the same, submitted by
# a raw JetStream publish as the raw mix submits) run alternately, PAIRS
# times, from one test binary on this machine, and each round's ratios
# fleet/raw are printed: the comparison never spans two machines or two
# moments.
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
printf '%-5s %11s %11s %7s %11s %7s %9s %9s %9s\n' pair raw_runs/s api_runs/s api/raw pub_runs/s pub/raw raw_alloc api_alloc pub_alloc
api_ratios=()
pub_ratios=()
for i in $(seq 1 "$PAIRS"); do
	read -r raw rawa _ < <(bench BenchmarkRawMix)
	read -r api apia _ < <(bench BenchmarkFleetRuns)
	read -r pub puba _ < <(bench BenchmarkFleetRawSubmit)
	api_ratio=$(awk -v f="$api" -v r="$raw" 'BEGIN {printf "%.2f", f/r}')
	pub_ratio=$(awk -v f="$pub" -v r="$raw" 'BEGIN {printf "%.2f", f/r}')
	api_ratios+=("$api_ratio")
	pub_ratios+=("$pub_ratio")
	printf '%-5s %11s %11s %7s %11s %7s %9s %9s %9s\n' "$i" "$raw" "$api" "$api_ratio" "$pub" "$pub_ratio" "$rawa" "$apia" "$puba"
done
# sorted and median: the rounds swing on this kind of machine, compare medians.
summary() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1; s=s $1 " "} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%s(median %.2f)", s, m}'; }
printf 'ratio fleet/raw over %s rounds, submitted through the API (BenchmarkFleetRuns): %s\n' "$PAIRS" "$(summary "${api_ratios[@]}")"
printf 'ratio fleet/raw over %s rounds, submitted by raw publish (BenchmarkFleetRawSubmit): %s\n' "$PAIRS" "$(summary "${pub_ratios[@]}")"
