#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a short time each.
set -euo pipefail
fuzztime="${1:-3s}"
cd "$(dirname "$0")/.."
found=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    found=1
    echo "fuzz: ./$dir $fn ($fuzztime)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "./$dir"
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . || true)
if [ "$found" = 0 ]; then echo "fuzz: no fuzz targets"; fi
