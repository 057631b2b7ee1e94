#!/usr/bin/env bash
# Alternated pairs of one workload group on two engines: the order swaps every pair (A B,
# then B A, ...), so that neither engine always runs first. Prints, per pair, the order,
# A's and B's time of the group's first phase (or of the phase whose name contains PHASE)
# and A's time / B's time (above 1: B is faster); then, for every phase of the group, the
# median ratio and how many pairs are at or above 1.
#
#   crates/ferrocore-bench/scripts/pairs.sh N GROUP ENGINE_A ENGINE_B [PHASE]
#   e.g. pairs.sh 30 w7 lmdb-writemap ferrocore-writemap
#
# Quick sizes (as `ferrocore-bench run`); build first with
# `cargo build --release -p ferrocore-bench` (and `-p ferrocore-lmdb` for ferrocore-c).
set -euo pipefail
n=$1 group=$2 a=$3 b=$4 phase=${5:-}
root=$(cd "$(dirname "$0")/../../.." && pwd)
bench=$root/target/release/ferrocore-bench
sizes='{"name":"quick","n":200000,"w2_n":1000000,"w2_txn":100000,"w6_commits":1000,"w6_prefill":2000000,"w7_entries":50000,"w7_txn":1000,"w7_record":256,"w9_elements":200000,"w9_individual":1000,"w9_batches":100,"w9_batch_size":1000,"w9_reads":200000,"w9_scans":100000,"w9_scan_len":10,"w9_threads":[2,8]}'
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs the group on engine $1; appends "engine<TAB>phase<TAB>secs" lines to the log and
# prints the chosen phase's seconds.
secs() {
    local dir
    dir=$(mktemp -d)
    "$bench" cell --group "$group" --engine "$1" --sizes "$sizes" --dir "$dir" 2>/dev/null |
        python3 -c '
import json, sys
engine, phase, log = sys.argv[1:]
phases = json.load(sys.stdin)["phases"]
with open(log, "a") as f:
    for p in phases:
        f.write("%s\t%s\t%s\n" % (engine, p["name"], p["secs"]))
print(next(p["secs"] for p in phases if phase in p["name"]))' "$1" "$phase" "$log"
    rm -rf "$dir"
}

for i in $(seq 1 "$n"); do
    if (( i % 2 )); then ta=$(secs "$a"); tb=$(secs "$b"); order="$a $b"
    else tb=$(secs "$b"); ta=$(secs "$a"); order="$b $a"; fi
    r=$(python3 -c "print(f'{$ta / $tb:.3f}')")
    echo "pair $i ($order): $a ${ta}s, $b ${tb}s, $a/$b $r"
done
python3 - "$log" "$a" "$b" <<'PY'
import collections, statistics, sys
log, a, b = sys.argv[1:]
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(log):
    engine, phase, secs = line.rstrip("\n").split("\t")
    runs[phase][engine].append(float(secs))
for phase, by in runs.items():
    r = [x / y for x, y in zip(by[a], by[b])]
    print(f"{phase}: median {statistics.median(r):.3f} of {len(r)} pairs ({a}/{b}), "
          f"from {min(r):.2f} to {max(r):.2f}; {sum(x >= 1 for x in r)} at or above 1")
PY
