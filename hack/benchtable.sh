#!/usr/bin/env bash
# Prints `go test -bench` output as a table, each row as a ratio to the
# Baseline benchmark of the same run (absolute times are noisy here).
set -euo pipefail
awk '
/^Benchmark/ { name=$1; sub(/-[0-9]+$/, "", name); ns[name]=$3; order[++n]=name; if (name ~ /Baseline/) base=$3 }
END {
	printf "\n| benchmark | ms/op | x baseline |\n|---|---:|---:|\n"
	for (i=1; i<=n; i++) { b=order[i]; printf "| %s | %.2f | %s |\n", b, ns[b]/1e6, base ? sprintf("%.1f", ns[b]/base) : "n/a" }
}' "$1"
