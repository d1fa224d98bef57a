#!/usr/bin/env bash
# Prints `go test -bench` output as a table, each row as a ratio to the
# Baseline benchmark of the same run (absolute times are noisy here), with
# the benchmark's own metrics (percentiles, memory) alongside.
set -euo pipefail
awk '
/^Benchmark/ {
	name=$1; sub(/-[0-9]+$/, "", name); ns[name]=$3; order[++n]=name
	if (name ~ /Baseline/) base=$3
	extra=""; for (i=5; i+1<=NF; i+=2) extra=extra (extra ? ", " : "") $i " " $(i+1); more[name]=extra
}
END {
	printf "\n| benchmark | ms/op | x baseline | metrics |\n|---|---:|---:|---|\n"
	for (i=1; i<=n; i++) { b=order[i]; printf "| %s | %.2f | %s | %s |\n", b, ns[b]/1e6, base ? sprintf("%.1f", ns[b]/base) : "n/a", more[b] }
}' "$1"
