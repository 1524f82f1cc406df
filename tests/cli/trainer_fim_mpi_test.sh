#!/usr/bin/env bash
# The toy trainer on FIM samples (--fim-data, golden case u16_L64_r05_spm05_1to1, Megatron's
# 2 DataLoader workers per DP rank, each with its own FIM random stream) at TP 2 x PP 2:
#  * the loss falls (the mean of the last 4 of 16 logged losses is at least 0.3 below the mean
#    of the first 4; the corpus' unigram entropy is 8.8 nats against ln(50000) = 10.8 at start);
#  * a run killed with SIGKILL after its checkpoint at step 8 (the trainer kills world rank 1
#    itself, --testing-kill-after-step) logged steps 1..8 bitwise as the uninterrupted run;
#  * resumed from that checkpoint it starts at step 9 and two resumes are bitwise equal (losses
#    and parameters). The FIM streams start fresh at a resume, as Megatron's DataLoader workers
#    do, so steps 9..16 are not the uninterrupted run's: that is not asserted.
# Usage: trainer_fim_mpi_test.sh TOY_TRAINER GOLDEN_FIM_DIR
set -euo pipefail
TRAINER=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/fim_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_trainer_fim.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$GOLDEN"

mapfile -t CASE < <(/usr/bin/python3 "$FLAGS" cases/u16_L64_r05_spm05_1to1)
DATA=("${CASE[@]}" --vocab-size 50000 --micro-batch-size 2 --global-batch-size 4 --d-model 64
      --lr 3e-3 --num-workers 2 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
      --train-iters 16)
train() {  # args...
  timeout 300 mpirun -n 4 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
    ${LD_PRELOAD:+-x LD_PRELOAD} "$TRAINER" "${DATA[@]}" "$@"
}
losses() { awk -F'\t' '$1 ~ /^[0-9]+$/ {print $1 "\t" $2}' "$1"; }

train --loss-log "$WORK/full.tsv" > "$WORK/full.out" 2>&1 \
  || { cat "$WORK/full.out"; fail "uninterrupted run"; }
[ "$(losses "$WORK/full.tsv" | wc -l)" -eq 16 ] || { cat "$WORK/full.out"; fail "not 16 steps"; }
/usr/bin/python3 - "$WORK/full.tsv" <<'PY' || fail "the loss did not fall"
import math, sys
loss = [float(l.split("\t")[1]) for l in open(sys.argv[1]) if l[0].isdigit()]
assert all(math.isfinite(x) for x in loss), loss
first, last = sum(loss[:4]) / 4, sum(loss[-4:]) / 4
print(f"FIM loss: mean of steps 1-4 {first:.4f}, of steps 13-16 {last:.4f}")
assert last < first - 0.3, f"fell by {first - last:.4f}, not 0.3"
PY

set +e
train --save "$WORK/ckpt" --save-interval 8 --testing-kill-after-step 8 \
  --loss-log "$WORK/cut.tsv" > "$WORK/kill.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
[ "$(cat "$WORK/ckpt/latest")" = step8 ] || fail "no checkpoint at step 8"
cmp <(losses "$WORK/cut.tsv") <(losses "$WORK/full.tsv" | head -8) \
  || fail "the killed run's steps 1..8 differ from the uninterrupted run's"
for k in 1 2; do
  train --load "$WORK/ckpt" --loss-log "$WORK/resumed$k.tsv" > "$WORK/resume$k.out" 2>&1 \
    || { cat "$WORK/resume$k.out"; fail "resume $k"; }
  [ "$(losses "$WORK/resumed$k.tsv" | head -1 | cut -f1)" = 9 ] || fail "resume $k: not at step 9"
  [ "$(losses "$WORK/resumed$k.tsv" | wc -l)" -eq 8 ] || fail "resume $k: not 8 steps"
done
[ "$(grep -c '^params_stage' "$WORK/resumed1.tsv")" -eq 2 ] || fail "no parameter digests"
cmp <(sort "$WORK/resumed1.tsv") <(sort "$WORK/resumed2.tsv") \
  || fail "two resumes from one checkpoint differ"
echo "fim tp2pp2: steps 1..8 as uninterrupted; two resumes at step 9 bitwise equal"
echo "toy trainer on FIM: ok"
