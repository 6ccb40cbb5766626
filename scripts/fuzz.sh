#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a short time each.
set -euo pipefail
fuzztime="${1:-2000x}"
# FUZZ_SKIP is a regular expression of package directories to leave out
# (make test skips the provider adapters, whose instrumented build of the
# OpenAI SDK alone takes minutes on two cores; make fuzz runs everything).
skip="${FUZZ_SKIP:-}"
cd "$(dirname "$0")/.."
found=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  if [ -n "$skip" ] && [[ "$dir" =~ $skip ]]; then
    continue
  fi
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    found=1
    echo "fuzz: ./$dir $fn ($fuzztime)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "./$dir"
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . || true)
if [ "$found" = 0 ]; then echo "fuzz: no fuzz targets"; fi
