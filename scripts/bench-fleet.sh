#!/usr/bin/env bash
# bench-fleet: the fleet's throughput against the broker's bound, measured
# side by side. Four benchmarks of one test binary run alternately, PAIRS
# rounds, on this machine, and each round's ratios fleet/raw are printed:
# the comparison never spans two machines or two moments.
#
#   BenchmarkRawMix          a plain client doing only the messages a run
#                            needs, submitting by JetStream publish
#   BenchmarkRawMixAPI       the same, each run submitted through a plain
#                            responder doing what the API does (request,
#                            record create, request publish, reply)
#   BenchmarkFleetRuns       the fleet, submitted through the NATS API
#   BenchmarkFleetRawSubmit  the fleet, submitted by raw publish
#
# Ratios: api/raw (the issue's first comparison: the fleet through the API
# against the raw mix without one), api/rawapi (the same messages on both
# sides: through an API) and pub/raw (the same: by raw publish); each in
# runs/s (fleet/raw) and in CPU time a run (raw/fleet: the runs a CPU
# second does, which other work on the machine disturbs less).
#
#   PAIRS=5 RUNS=2000 ./scripts/bench-fleet.sh
set -euo pipefail
PAIRS=${PAIRS:-5}
RUNS=${RUNS:-2000}
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO test -c -o "$tmp/worker.test" ./pkg/worker/
bench() { # name -> "runs/s allocs/op B/op cpu-us/run"
	"$tmp/worker.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "${RUNS}x" -test.benchmem |
		awk -v n="$1" '$1 ~ "^"n"-" {c="-"; for (i=2;i<=NF;i++){if($(i)=="runs/s")r=$(i-1); if($(i)=="allocs/op")a=$(i-1); if($(i)=="B/op")m=$(i-1); if($(i)=="cpu-us/run")c=$(i-1)}} END {if (r=="") exit 1; print r, a, m, c}'
}
ratio() { awk -v f="$1" -v r="$2" 'BEGIN {if (f == "-" || r == "-" || r == 0) {print "-"; exit}; printf "%.2f", f/r}'; }
# Each round prints runs/s and CPU µs a run (server and clients: one
# process) of the four, and the ratios both ways: runs/s fleet/raw, and
# CPU raw/fleet (runs per CPU second, fleet against raw), which other work
# on the machine disturbs less than runs/s.
printf '%-5s %9s %9s %9s %9s | %7s %7s %7s %7s | %7s %10s %7s | %7s %10s %7s | %9s %9s\n' \
	round raw_run/s rawapi/s api_run/s pub_run/s raw_us rawapi_us api_us pub_us api/raw api/rawapi pub/raw cpu:a/r cpu:a/ra cpu:p/r api_alloc pub_alloc
api_ratios=()
like_ratios=()
pub_ratios=()
cpu_api=()
cpu_like=()
cpu_pub=()
for i in $(seq 1 "$PAIRS"); do
	read -r raw _ _ rawc < <(bench BenchmarkRawMix)
	read -r rawapi _ _ rawapic < <(bench BenchmarkRawMixAPI)
	read -r api apia _ apic < <(bench BenchmarkFleetRuns)
	read -r pub puba _ pubc < <(bench BenchmarkFleetRawSubmit)
	api_ratios+=("$(ratio "$api" "$raw")")
	like_ratios+=("$(ratio "$api" "$rawapi")")
	pub_ratios+=("$(ratio "$pub" "$raw")")
	cpu_api+=("$(ratio "$rawc" "$apic")")
	cpu_like+=("$(ratio "$rawapic" "$apic")")
	cpu_pub+=("$(ratio "$rawc" "$pubc")")
	printf '%-5s %9s %9s %9s %9s | %7s %7s %7s %7s | %7s %10s %7s | %7s %10s %7s | %9s %9s\n' "$i" "$raw" "$rawapi" "$api" "$pub" \
		"$rawc" "$rawapic" "$apic" "$pubc" "${api_ratios[-1]}" "${like_ratios[-1]}" "${pub_ratios[-1]}" \
		"${cpu_api[-1]}" "${cpu_like[-1]}" "${cpu_pub[-1]}" "$apia" "$puba"
done
# sorted and median: the rounds swing on this kind of machine, compare medians.
summary() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1; s=s $1 " "} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%s(median %.2f)", s, m}'; }
printf 'over %s rounds, fleet through the API / raw mix (BenchmarkFleetRuns / BenchmarkRawMix): %s\n' "$PAIRS" "$(summary "${api_ratios[@]}")"
printf 'over %s rounds, through an API on both sides (BenchmarkFleetRuns / BenchmarkRawMixAPI): %s\n' "$PAIRS" "$(summary "${like_ratios[@]}")"
printf 'over %s rounds, by raw publish on both sides (BenchmarkFleetRawSubmit / BenchmarkRawMix): %s\n' "$PAIRS" "$(summary "${pub_ratios[@]}")"
printf 'CPU a run, raw / fleet, the same three: %s · %s · %s\n' "$(summary "${cpu_api[@]}")" "$(summary "${cpu_like[@]}")" "$(summary "${cpu_pub[@]}")"
