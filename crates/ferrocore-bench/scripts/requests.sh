#!/usr/bin/env bash
# Read requests (c/requests.c) on Debian's LMDB (liblmdb0) and on ferrocore's liblmdb.so,
# alternated RUNS times for each case (a read txn per request, or one reset and renewed;
# 1 and 2 threads; LMDB with and without MDB_NOTLS): prints the median requests a second
# of each library and ferrocore's ÷ LMDB's (above 1: ferrocore serves more).
#
#   crates/ferrocore-bench/scripts/requests.sh [RUNS] [N]
#
# Needs gcc and liblmdb-dev; build ferrocore's library first with
# `cargo build --release -p ferrocore-lmdb`.
set -euo pipefail
runs=${1:-5} n=${2:-1000000}
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/requests" "$root/crates/ferrocore-bench/c/requests.c" -llmdb -lpthread
mkdir "$work/ours"
ln -s "$root/target/release/liblmdb.so" "$work/ours/liblmdb.so.0"
run() { # LIBDIR MODE THREADS [notls]
    local dir
    dir=$(mktemp -d)
    LD_LIBRARY_PATH=$1 "$work/requests" "$dir" "$n" "$2" "$3" ${4:-}
    rm -rf "$dir"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '%-34s %14s %14s %8s\n' case "LMDB req/s" "ferrocore" ratio
for mode in 0 1; do
    for threads in 1 2; do
        for notls in "" notls; do
            : > "$work/a"; : > "$work/b"
            for i in $(seq 1 "$runs"); do
                if (( i % 2 )); then
                    run "" $mode $threads $notls >> "$work/a"
                    run "$work/ours" $mode $threads $notls >> "$work/b"
                else
                    run "$work/ours" $mode $threads $notls >> "$work/b"
                    run "" $mode $threads $notls >> "$work/a"
                fi
            done
            a=$(median < "$work/a"); b=$(median < "$work/b")
            what=$([ $mode = 0 ] && echo "txn per request" || echo "reset/renew")
            printf '%-34s %14.0f %14.0f %8.2f\n' "$what, $threads thr${notls:+, NOTLS}" "$a" "$b" \
                "$(python3 -c "print($b / $a)")"
        done
    done
done
