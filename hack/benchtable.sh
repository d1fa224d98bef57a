#!/usr/bin/env bash
# Prints `go test -bench` output as one table. Each row carries its own
# metrics; those named x-<baseline> are ratios the benchmark measured against
# a baseline in the same run (bare workflows, no open runs, raw size, the
# uncached policy, Alertmanager's group_wait, notifications posted straight to
# the alert receiver, the control plane without a node). The "x direct scale" column is the row's time as a ratio to
# BenchmarkBaselineDirectScale of the same go test run (absolute times are
# noisy here), for the rows of the run that has it.
set -euo pipefail
awk '
/^pkg:/ { run++ }
/^Benchmark/ {
	name=$1; sub(/-[0-9]+$/, "", name); ns[name]=$3; order[++n]=name; runOf[name]=run
	if (name == "BenchmarkBaselineDirectScale") { base=$3; baseRun=run }
	extra=""; for (i=5; i+1<=NF; i+=2) extra=extra (extra ? ", " : "") $(i+1) " " $i; more[name]=extra
}
END {
	printf "\n| benchmark | ms/op | x direct scale | metrics |\n|---|---:|---:|---|\n"
	for (i=1; i<=n; i++) {
		b=order[i]
		ratio = (base && runOf[b] == baseRun) ? sprintf("%.1f", ns[b]/base) : ""
		printf "| %s | %.2f | %s | %s |\n", b, ns[b]/1e6, ratio, more[b]
	}
}' "$1"
