#!/usr/bin/env bash
# The PyTorch example trainer under a real (local, single-node) Slurm: srun --mpi=pmix -n 4.
# REQUIRES: a Slurm (scripts/test starts scripts/slurm-local and exports SLURM_CONF).
# Args: gridfeed binary, Python module dir, project root.
set -euo pipefail
export PYTHONPATH="$(realpath "$2")${PYTHONPATH:+:$PYTHONPATH}"
ROOT=$(realpath "$3")
if [ -z "${SLURM_CONF:-}" ]; then
  LOCAL_SLURM=${GRIDFEED_SLURM_DIR:-/tmp/gridfeed-slurm}
  if [ -f "$LOCAL_SLURM/slurmctld.pid" ] && kill -0 "$(cat "$LOCAL_SLURM/slurmctld.pid")" 2>/dev/null
  then
    export SLURM_CONF=$LOCAL_SLURM/slurm.conf
  fi
fi
WORK=$(mktemp -d /tmp/gridfeed_torch_slurm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export PYTHONDONTWRITEBYTECODE=1
fail() { echo "FAIL: $*" >&2; exit 1; }
sinfo -h -o %T | grep -qE "idle|mixed" || fail "no Slurm with an idle node (scripts/slurm-local start, or set SLURM_CONF)"
"$ROOT/scripts/prepare-kjv" "$WORK/kjv" > /dev/null
cd "$WORK"
srun --mpi=pmix -n 4 /usr/bin/python3 "$ROOT/apps/torch_trainer/train.py" \
  --data-path kjv/kjv_text_document --split 98,2,0 --seq-length 64 --train-samples 2000 \
  --vocab-size 8000 --eod-id 2 --d-model 64 --tensor-model-parallel-size 2 \
  --micro-batch-size 4 --global-batch-size 8 --train-iters 3 --save ckpt \
  > srun.out 2>&1 || { cat srun.out; fail "srun"; }
grep -q "^step 3 loss" srun.out || { cat srun.out; fail "srun output"; }
[ "$(cat ckpt/latest)" = "step3" ] || fail "no checkpoint"
echo "torch trainer under srun --mpi=pmix: ok"
