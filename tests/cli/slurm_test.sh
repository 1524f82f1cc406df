#!/usr/bin/env bash
# gridfeed under a real (local, single-node) Slurm: `srun --mpi=pmix -n 8` and
# `sbatch --wait` of scripts/slurm/feed.sbatch both run to completion with their checks.
# REQUIRES: scripts/slurm-local start (scripts/test does it).
set -euo pipefail
GRIDFEED=$(realpath "$1")
ROOT=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_slurm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1
fail() { echo "FAIL: $*" >&2; exit 1; }
sinfo -h -o %T | grep -qE "idle|mixed" || fail "no local Slurm (scripts/slurm-local start)"

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
echo "slurm: srun and sbatch ok"
