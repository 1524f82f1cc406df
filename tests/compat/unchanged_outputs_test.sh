#!/usr/bin/env bash
# Behaviour kept across refactors: `gridfeed run --dump --ledger` (plus an `audit replay`)
# of fixed configurations must produce files whose SHA-256 equal the manifest recorded before
# the one-seam redesign (tests/compat/unchanged_outputs.sha256, recorded with the binary of
# commit 804db4e). Scenarios: the demo options at
# TP 2 x PP 2 x CP 1 x DP 2, a weighted blend at TP 1 x PP 2 x CP 2 x DP 2 and every sample flag
# with attention masks at TP 2 x PP 1 x CP 2 x DP 1.
#   tests/compat/unchanged_outputs_test.sh GRIDFEED GOLDEN_DIR [--record]
# --record rewrites the manifest (only when an output change is intended and explained).
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
MODE=${3:-check}
HERE=$(cd "$(dirname "$0")" && pwd)
CONFIGS=$(cd "$HERE/../../configs" && pwd)
MANIFEST="$HERE/unchanged_outputs.sha256"
WORK=$(mktemp -d /tmp/gridfeed_compat.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
run() {
  local name=$1 n=$2
  shift 2
  mpirun -n "$n" --oversubscribe "$GRIDFEED" run "$@" --dump "out/$name/dump" \
    --ledger "out/$name/ledger" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
}
cd "$WORK"  # relative data paths, as the ledgers record them
ln -s "$GOLDEN/corpora" corpora
run demo 8 --config "$CONFIGS/demo.yaml" --data-path corpora/corpus_u16 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 4 \
  --global-batch-size 16 --train-iters 20
run blend 8 --config "$CONFIGS/tables_blend.yaml" --pipeline-model-parallel-size 2 \
  --context-parallel-size 2 --micro-batch-size 2 --global-batch-size 8 --train-iters 10
run flags 4 --config "$CONFIGS/samples_all_flags.yaml" --tensor-model-parallel-size 2 \
  --context-parallel-size 2 --micro-batch-size 2 --train-iters 6
"$GRIDFEED" audit replay --ledger out/blend/ledger --steps 2:5 --data-parallel-size 2 \
  --micro-batch-size 2 --global-batch-size 8 --out out/blend/replay > "$WORK/replay.log" 2>&1 \
  || { cat "$WORK/replay.log"; exit 1; }
# Ledgers are compared without their format line and segment lines (format version 2 added a
# "# segment" line per start; the records and configuration lines must not change).
for f in out/*/ledger/*.tsv; do
  grep -v -e '^# gridfeed ledger v' -e '^# segment ' "$f" > "$f.records" || true
  mv "$f.records" "$f"
done
(cd out && find . -type f | LC_ALL=C sort | xargs sha256sum) > "$WORK/got.sha256"
if [ "$MODE" = "--record" ]; then
  cp "$WORK/got.sha256" "$MANIFEST"
  echo "recorded $(wc -l < "$MANIFEST") files in $MANIFEST"
  exit 0
fi
if ! diff -u "$MANIFEST" "$WORK/got.sha256"; then
  echo "FAIL: outputs differ from the recorded manifest" >&2
  exit 1
fi
echo "unchanged: $(wc -l < "$MANIFEST") files byte-identical"
