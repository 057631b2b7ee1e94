#!/usr/bin/env bash
# Runs the test suite of the Python binding py-lmdb (from PyPI) on ferrocore's liblmdb.so,
# and, as the baseline, on the system's real LMDB (Debian's liblmdb-dev), file by file, and
# prints both results side by side.
#
# Needs: cargo, python3 with venv and its headers, a C compiler, network access to PyPI;
# installs liblmdb-dev with apt-get when missing. Not part of `cargo test` (it downloads
# and builds a Python package). Usage:
#   crates/ferrocore-lmdb/scripts/py-lmdb-tests.sh [WORKDIR]
set -euo pipefail
PYLMDB_VERSION=${PYLMDB_VERSION:-3.0.0}
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${1:-$(mktemp -d /tmp/py-lmdb-tests.XXXXXX)}
mkdir -p "$work"
echo "work directory: $work"

if [ ! -f /usr/include/lmdb.h ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq liblmdb-dev >/dev/null) || true
fi

(cd "$root" && cargo build --release -p ferrocore-lmdb)
lib="$work/lib"
mkdir -p "$lib"
ln -sf "$root/target/release/liblmdb.so" "$lib/liblmdb.so"
ln -sf "$root/target/release/liblmdb.so" "$lib/liblmdb.so.0"

cd "$work"
python3 -m venv venv-ferrocore
python3 -m venv venv-lmdb
for v in venv-ferrocore venv-lmdb; do "$v/bin/pip" install -q pytest; done
"venv-lmdb/bin/pip" download -q --no-binary :all: --no-deps "lmdb==$PYLMDB_VERSION"
rm -rf "lmdb-$PYLMDB_VERSION" && tar xzf "lmdb-$PYLMDB_VERSION.tar.gz"
# Built against ferrocore's header and library, instead of py-lmdb's bundled LMDB.
LMDB_FORCE_SYSTEM=1 LMDB_INCLUDEDIR="$root/crates/ferrocore-lmdb/include" LMDB_LIBDIR="$lib" \
  venv-ferrocore/bin/pip install -q "./lmdb-$PYLMDB_VERSION"
# Built against the system's real LMDB: the baseline.
LMDB_FORCE_SYSTEM=1 venv-lmdb/bin/pip install -q "./lmdb-$PYLMDB_VERSION"

# The tests run from a copy, so that `import lmdb` finds the installed package.
summary=()
for engine in ferrocore lmdb; do
  rm -rf "tests-$engine" && cp -r "lmdb-$PYLMDB_VERSION/tests" "tests-$engine"
  for f in "tests-$engine"/*_test.py; do
    name=$(basename "$f")
    log="$work/$engine-$name.log"
    set +e
    if [ "$engine" = ferrocore ]; then
      (cd "tests-$engine" && LD_LIBRARY_PATH="$lib" timeout 600 "../venv-$engine/bin/python" -m pytest -q -p no:cacheprovider -rfEs "$name" >"$log" 2>&1)
    else
      (cd "tests-$engine" && timeout 600 "../venv-$engine/bin/python" -m pytest -q -p no:cacheprovider -rfEs "$name" >"$log" 2>&1)
    fi
    rc=$?
    set -e
    last=$(tail -1 "$log")
    if [ $rc -gt 128 ]; then last="CRASHED (signal $((rc - 128)))"; fi
    summary+=("$engine $name: $last")
  done
done
printf '%s\n' "${summary[@]}" | sort -k2,2 -k1,1
echo "failures on ferrocore:"
grep -h '^FAILED' "$work"/ferrocore-*.log || true
