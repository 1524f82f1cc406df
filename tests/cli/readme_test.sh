#!/usr/bin/env bash
# README's "After scripts/demo" block, run verbatim (bash -e) in a scratch folder laid out like
# the repository (configs/, docs/, scripts/, apps/, tests/ and build/ linked) whose out/demo holds the
# demo's corpora, prepared by scripts/prepare-kjv as scripts/demo prepares them. A command a
# user is told to run after the demo that fails, or a block that is missing, fails the test.
# Usage: readme_test.sh GRIDFEED_BINARY
set -euo pipefail
GRIDFEED=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$GRIDFEED")/.." && pwd)
WORK=$(mktemp -d /tmp/gridfeed_readme.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for d in configs docs scripts apps tests; do ln -s "$REPO/$d" "$WORK/$d"; done
ln -s "$BUILD" "$WORK/build"
# The state README promises is what scripts/demo builds, not the full build this test runs
# after: the Python module is removed and only the demo's own build step may bring it back.
if [ "$BUILD" = "$REPO/build" ]; then
  rm -f "$BUILD"/python/gridfeed*.so
  "$REPO/scripts/demo" --build-only > "$WORK/demo-build.log" 2>&1 \
    || { tail -n 40 "$WORK/demo-build.log"; echo "scripts/demo --build-only failed"; exit 1; }
fi
# The corpora are kept in the build tree between runs (prepare-kjv skips what exists).
CORPUS=$BUILD/readme-test-demo
(cd "$WORK" && scripts/prepare-kjv "$CORPUS" >/dev/null)
mkdir -p "$WORK/out"
ln -s "$CORPUS" "$WORK/out/demo"

block=$(awk '/<!-- readme-test: end -->/ { inside = 0 }
             inside && !/^```/ { print }
             /<!-- readme-test: begin -->/ { inside = 1 }' "$REPO/README.md")
if [ "$(printf '%s\n' "$block" | grep -c '^mpirun\|^gridfeed')" -lt 5 ]; then
  echo "README's readme-test block is missing or has lost its commands:"
  printf '%s\n' "$block"
  exit 1
fi
cd "$WORK"
if ! timeout 900 bash -euo pipefail -c "$block" > "$WORK/out.log" 2>&1; then
  tail -n 60 "$WORK/out.log"
  echo "README's block failed (full log above, last 60 lines)"
  exit 1
fi
grep -E "^(verify|audit|ledger)|verified|OK" "$WORK/out.log" | tail -n 5 || true
echo "readme_test: README's block ran as written"
