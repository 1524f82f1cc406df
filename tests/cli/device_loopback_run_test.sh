#!/usr/bin/env bash
# `gridfeed run --device-broadcast` through the loopback twin (--testing-device-loopback, no GPU):
# run's checks pass on the host copy of every rank's device payload, and its dump is
# byte-identical to the host path's on TP 2 x PP 2 x DP 2 (8 ranks) with attention masks.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_devloop.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
FLAGS=(--data-path corpora/corpus_u16 --split 969,30,1 --seq-length 64 --seed 1234
       --train-samples 3000 --valid-samples 120 --test-samples 30 --micro-batch-size 4
       --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --global-batch-size 16
       --train-iters 3 --create-attention-mask)
fail() { echo "FAIL: $*" >&2; exit 1; }
timeout 120 mpirun -n 8 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" --dump "$WORK/host" \
  > "$WORK/host.out" 2>&1 || { cat "$WORK/host.out"; fail "host path run failed"; }
timeout 120 mpirun -n 8 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" --device-broadcast \
  --testing-device-loopback --dump "$WORK/device" > "$WORK/device.out" 2>&1 ||
  { cat "$WORK/device.out"; fail "device path (loopback) run failed"; }
grep -q "checks: .* ok" "$WORK/device.out" || fail "device path: no checks line"
[ -f "$WORK/device/rank1/tokens.npy" ] || fail "device path: TP rank 1 dumped no tokens"
diff -r "$WORK/host" "$WORK/device" > "$WORK/diff" || { head "$WORK/diff"; fail "dumps differ"; }
echo "device loopback run: dump identical to the host path"
