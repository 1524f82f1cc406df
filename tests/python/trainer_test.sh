#!/usr/bin/env bash
# The PyTorch example trainer (apps/torch_trainer) on the KJV corpus under mpirun at
# TP 2 x CP 1 x DP 2: the loss falls below 75% of its first value; a run killed with SIGKILL
# after its checkpoint at step K and resumed to 2K has bitwise the same losses for K+1..2K,
# the same final parameters and the same ledger records as an uninterrupted 2K run, and its
# ledger passes `gridfeed audit verify`. Then a CP 2 x DP 2 run (zigzag chunks reassembled).
# Args: gridfeed binary, Python module dir, project root.
set -euo pipefail
GRIDFEED=$(realpath "$1")
export PYTHONPATH="$(realpath "$2")${PYTHONPATH:+:$PYTHONPATH}"
ROOT=$(realpath "$3")
WORK=$(mktemp -d /tmp/gridfeed_torch.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
fail() { echo "FAIL: $*" >&2; exit 1; }
"$ROOT/scripts/prepare-kjv" "$WORK/kjv" > /dev/null
cd "$WORK"
ARGS=(--data-path kjv/kjv_text_document --split 98,2,0 --seq-length 64 --train-samples 20000
      --vocab-size 8000 --eod-id 2 --micro-batch-size 4 --global-batch-size 16 --d-model 64
      --lr 6e-3)
train() { mpirun -n 4 --oversubscribe -x PYTHONPATH -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
            -x PYTHONDONTWRITEBYTECODE /usr/bin/python3 "$ROOT/apps/torch_trainer/train.py" \
            "${ARGS[@]}" "$@"; }
records() { grep -h '^[0-9]' "$1"/dp*.tsv; }  # every record line, in DP-rank order

K=5 N=10
train --tensor-model-parallel-size 2 --train-iters $N --loss-log full.tsv --ledger full \
  > full.out 2>&1 || { cat full.out; fail "uninterrupted run"; }
set +e
train --tensor-model-parallel-size 2 --train-iters $N --save ckpt --save-interval $K \
  --testing-kill-after-step $K --ledger cut --loss-log cut.tsv > kill.out 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
[ "$(cat ckpt/latest)" = "step$K" ] || fail "no checkpoint at step $K"
train --tensor-model-parallel-size 2 --train-iters $N --load ckpt --ledger cut \
  --loss-log resumed.tsv > resume.out 2>&1 || { cat resume.out; fail "resume"; }
cmp <(awk -F'\t' -v k=$K '$1 == "params" || $1 > k' full.tsv) \
    <(awk -F'\t' -v k=$K '$1 == "params" || $1 > k' resumed.tsv) \
  || fail "resumed losses or parameters differ from the uninterrupted run"
cmp <(records full) <(records cut) || fail "the resumed ledger's records differ"
"$GRIDFEED" audit verify --ledger cut || fail "audit verify of the resumed run's ledger"
first=$(awk -F'\t' '$1 == 1 {print $2}' full.tsv)
last=$(awk -F'\t' -v n=$N '$1 == n {print $2}' full.tsv)
/usr/bin/python3 -c "import sys; f, l = float(sys.argv[1]), float(sys.argv[2]); \
assert l < 0.75 * f, (f, l); print(f'loss {f:.3f} -> {l:.3f} after $N steps')" "$first" "$last"
echo "kill at step $K + resume == uninterrupted run: losses, parameters and ledger, bitwise"

# CP 2 x DP 2: each rank gets two zigzag chunks; the trainer reassembles the full sequence.
train --context-parallel-size 2 --train-iters 2 --loss-log cp.tsv > cp.out 2>&1 \
  || { cat cp.out; fail "CP 2 run"; }
grep -q "^step 2 loss" cp.out || { cat cp.out; fail "CP 2 output"; }
# An error every rank reaches (here: a missing corpus) ends the job with one message per rank.
set +e
train --data-path kjv/absent --train-iters 1 > missing.out 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a missing corpus exited 0"
# (ranks' lines may interleave: count occurrences, not lines)
[ "$(grep -o "error (rank [0-3]): NotFound: rank 0 (table build): cannot open file 'kjv/absent.idx'" \
     missing.out | sort -u | wc -l)" = 4 ] || { cat missing.out; fail "one message per rank"; }
# A stop the ranks agree on after the Feeder opened (here: PP 2, which this trainer refuses)
# closes it collectively: rc 1 with the trainer's message on every rank, no gridfeed abort.
set +e
train --pipeline-model-parallel-size 2 --train-iters 1 > stop.out 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat stop.out; fail "an agreed stop: rc $rc, not 1"; }
[ "$(grep -o "train.py: error (rank [0-3]): Stop: " stop.out | sort -u | wc -l)" = 4 ] ||
  { cat stop.out; fail "an agreed stop: one message per rank"; }
if grep -q "not closed on every rank" stop.out; then
  cat stop.out; fail "an agreed stop ended through gridfeed's exit check"
fi
echo "torch trainer: ok"
