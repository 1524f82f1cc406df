#!/usr/bin/env bash
# gridfeed under a real (local, single-node) Slurm: `srun --mpi=pmix -n 8` and
# `sbatch --wait` of scripts/slurm/feed.sbatch both run to completion with their checks.
# REQUIRES: a Slurm: SLURM_CONF names its configuration (scripts/test exports it), else the one
# scripts/slurm-local runs (its conf, when its slurmctld runs), else the machine's own.
set -euo pipefail
GRIDFEED=$(realpath "$1")
ROOT=$(realpath "$2")
if [ -z "${SLURM_CONF:-}" ]; then
  LOCAL_SLURM=${GRIDFEED_SLURM_DIR:-/tmp/gridfeed-slurm}
  if [ -f "$LOCAL_SLURM/slurmctld.pid" ] && kill -0 "$(cat "$LOCAL_SLURM/slurmctld.pid")" 2>/dev/null
  then
    export SLURM_CONF=$LOCAL_SLURM/slurm.conf
  fi
fi
WORK=$(mktemp -d /tmp/gridfeed_slurm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1
fail() { echo "FAIL: $*" >&2; exit 1; }
sinfo -h -o %T | grep -qE "idle|mixed" || fail "no Slurm with an idle node (scripts/slurm-local start, or set SLURM_CONF)"

cd "$ROOT/tests/golden/megatron"
srun --mpi=pmix -n 8 "$GRIDFEED" run --data-path corpora/corpus_u16 --split 969,30,1 \
  --seq-length 64 --train-samples 3000 --micro-batch-size 2 --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --train-iters 5 > "$WORK/srun.out" 2>&1 \
  || { cat "$WORK/srun.out"; fail "srun"; }
grep -q "run: 8 ranks (TP 2 x PP 2 x CP 1 x DP 2)" "$WORK/srun.out" || fail "srun output"
grep -q "checks: .* ok" "$WORK/srun.out" || fail "srun checks"

cat > "$WORK/feed.yaml" <<YAML
data-path: [corpora/corpus_u16]
split: "969,30,1"
seq-length: 64
train-samples: 3000
YAML
cd "$ROOT/tests/golden/megatron"
GRIDFEED="$GRIDFEED" GRIDFEED_ROOT="$ROOT/tests/golden/megatron" GRIDFEED_CONFIG="$WORK/feed.yaml" \
  sbatch --wait --output="$WORK/job-%j.out" "$ROOT/scripts/slurm/feed.sbatch" > "$WORK/sbatch.out" \
  || { cat "$WORK"/job-*.out 2>/dev/null; fail "sbatch"; }
grep -q "checks: .* ok" "$WORK"/job-*.out || { cat "$WORK"/job-*.out; fail "batch job output"; }
# The toy trainer, when built: srun -n 8 and sbatch --wait of scripts/slurm/train.sbatch.
TRAINER=$(dirname "$GRIDFEED")/toy_trainer
if [ -x "$TRAINER" ]; then
  "$ROOT/scripts/prepare-kjv" "$WORK/kjv" > /dev/null
  cd "$WORK"
  T=(--data-path kjv/kjv_text_document --split 98,2,0 --seq-length 64 --train-samples 2000
     --vocab-size 8000 --eod-id 2 --d-model 64)
  OPENBLAS_NUM_THREADS=1 srun --mpi=pmix -n 8 "$TRAINER" "${T[@]}" --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --micro-batch-size 4 --global-batch-size 8 \
    --train-iters 3 > "$WORK/train-srun.out" 2>&1 || { cat "$WORK/train-srun.out"; fail "trainer srun"; }
  grep -q "step 3 loss" "$WORK/train-srun.out" || fail "trainer srun output"
  cat > "$WORK/train.yaml" <<YAML
data-path: [kjv/kjv_text_document]
split: "98,2,0"
seq-length: 64
train-samples: 2000
vocab-size: 8000
eod-id: 2
YAML
  TRAINER="$TRAINER" GRIDFEED_ROOT="$WORK" GRIDFEED_CONFIG="$WORK/train.yaml" ITERS=3 \
    TRAIN_EXTRA_ARGS="--d-model 64" \
    sbatch --wait --output="$WORK/train-%j.out" "$ROOT/scripts/slurm/train.sbatch" > /dev/null \
    || { cat "$WORK"/train-*.out; fail "trainer sbatch"; }
  grep -q "step 3 loss" "$WORK"/train-*.out || { cat "$WORK"/train-*.out; fail "trainer batch job"; }
fi
echo "slurm: srun and sbatch ok"
