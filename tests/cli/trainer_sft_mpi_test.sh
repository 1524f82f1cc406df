#!/usr/bin/env bash
# The toy trainer on packed SFT micro-batches (--sft, golden corpus sft_short of case
# cp2_h_aligned_L128, packed for CP 2 in every run so all layouts see the same rows):
#  * document-aware attention: at one stage every document of every packed row gives the logits
#    it gives alone (--testing-check-documents);
#  * at TP 2 x PP 2 the loss falls (last / first logged loss < 0.6);
#  * a run killed with SIGKILL after its checkpoint at step 8 (the trainer kills world rank 1
#    itself, --testing-kill-after-step; nothing is killed by name) and resumed from it has
#    bitwise the losses of steps 9..16 and the final parameters of the uninterrupted run;
#  * CP 2 (THD slices reassembled by the trainer) trains bitwise as CP 1 does.
# Usage: trainer_sft_mpi_test.sh TOY_TRAINER GOLDEN_SFT_DIR
set -euo pipefail
TRAINER=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/sft_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_trainer_sft.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$GOLDEN"

# The case's flags with 64 training samples (16 steps of 4); later flags override earlier
# ones, so each run sets its own --context-parallel-size after them.
mapfile -t CASE < <(/usr/bin/python3 "$FLAGS" cases/cp2_h_aligned_L128)
for i in "${!CASE[@]}"; do
  [ "${CASE[$i]}" != --train-samples ] || CASE[$((i + 1))]=64
done
DATA=("${CASE[@]}" --sft-context-parallel-size 2 --vocab-size 512 --micro-batch-size 2
      --global-batch-size 4 --d-model 64 --lr 3e-3)
train() {  # ranks, args...
  local n=$1; shift
  timeout 300 mpirun -n "$n" --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
    ${LD_PRELOAD:+-x LD_PRELOAD} "$TRAINER" "${DATA[@]}" "$@"
}
losses() { awk -F'\t' '$1 ~ /^[0-9]+$/ {print $1 "\t" $2}' "$1"; }

# Document-aware attention, checked against each document alone.
train 1 --context-parallel-size 1 --train-iters 2 --testing-check-documents \
  > "$WORK/docs.out" 2>&1 || { cat "$WORK/docs.out"; fail "document check"; }
n=$(awk '/documents give their logits alone/ {s += $3} END {print s + 0}' "$WORK/docs.out")
[ "$n" -ge 8 ] || { cat "$WORK/docs.out"; fail "only $n documents checked"; }
echo "document-aware attention: $n documents give the same logits alone as in their packed rows"

# TP 2 x PP 2: the loss falls; kill at step 8 + resume == uninterrupted, bitwise.
GRID=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --context-parallel-size 1)
d="$WORK/tp2pp2"
mkdir -p "$d"
train 4 "${GRID[@]}" --train-iters 16 --loss-log "$d/full.tsv" > "$d/full.out" 2>&1 \
  || { cat "$d/full.out"; fail "uninterrupted run"; }
[ "$(losses "$d/full.tsv" | wc -l)" -eq 16 ] || { cat "$d/full.out"; fail "not 16 logged steps"; }
/usr/bin/python3 - "$d/full.tsv" <<'PY' || fail "the loss did not fall"
import math, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l[0].isdigit()]
first, last = float(rows[0][1]), float(rows[-1][1])
assert all(math.isfinite(float(r[1])) for r in rows), rows
ratio = last / first
print(f"SFT loss {first:.4f} -> {last:.4f} after {len(rows)} steps: ratio {ratio:.3f}")
assert ratio < 0.6, f"ratio {ratio:.3f} not below 0.6"
PY
set +e
train 4 "${GRID[@]}" --train-iters 16 --save "$d/ckpt" --save-interval 8 \
  --testing-kill-after-step 8 --loss-log "$d/cut.tsv" > "$d/kill.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
[ "$(cat "$d/ckpt/latest")" = step8 ] || fail "no checkpoint at step 8"
[ "$(losses "$d/cut.tsv" | wc -l)" -eq 8 ] || fail "the killed run did not stop at step 8"
train 4 "${GRID[@]}" --train-iters 16 --load "$d/ckpt" --loss-log "$d/resumed.tsv" \
  > "$d/resume.out" 2>&1 || { cat "$d/resume.out"; fail "resume"; }
[ "$(losses "$d/resumed.tsv" | head -1 | cut -f1)" = 9 ] || fail "the resume did not start at step 9"
# (sorted: the stages append their parameter lines in no fixed order)
cmp <(awk -F'\t' '$1 ~ /^params/ || $1 > 8' "$d/full.tsv" | sort) \
    <(awk -F'\t' '$1 ~ /^params/ || $1 > 8' "$d/resumed.tsv" | sort) \
  || fail "resumed losses or parameters differ from the uninterrupted run"
[ "$(grep -c '^params_stage' "$d/resumed.tsv")" -eq 2 ] || fail "no parameter digests"
echo "tp2pp2: kill at step 8 + resume == uninterrupted run, bitwise (losses 9..16, parameters)"

# CP 2 against CP 1 (the same packed rows): the same losses and parameters, bitwise.
train 1 --context-parallel-size 1 --train-iters 6 --loss-log "$WORK/cp1.tsv" \
  > "$WORK/cp1.out" 2>&1 || { cat "$WORK/cp1.out"; fail "CP 1 run"; }
train 2 --context-parallel-size 2 --train-iters 6 --loss-log "$WORK/cp2.tsv" \
  > "$WORK/cp2.out" 2>&1 || { cat "$WORK/cp2.out"; fail "CP 2 run"; }
[ "$(losses "$WORK/cp1.tsv" | wc -l)" -eq 6 ] || fail "CP 1: not 6 logged steps"
cmp "$WORK/cp1.tsv" "$WORK/cp2.tsv" || fail "CP 2 trains otherwise than CP 1"
echo "cp2: THD slices reassembled, losses and parameters equal CP 1's, bitwise"
echo "toy trainer on SFT: ok"
