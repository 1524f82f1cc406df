#!/usr/bin/env bash
# A run whose --train-iters the data cannot complete is refused at start-up, naming the
# numbers, instead of stopping part-way: the refusal comes before any step on every rank, the
# largest --train-iters it offers does run to the end, and one more is refused again; the same
# from a resume point (--consumed-samples).
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_run_length.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
# One epoch of corpus_u16 at 2048 tokens is a few hundred samples: a short split.
FLAGS=(--data-path corpora/corpus_u16 --split 100,0,0 --seq-length 2048 --train-samples 64
       --vocab-size 50000 --micro-batch-size 2 --global-batch-size 8)

run() {  # run NAME ARGS...: 2 ranks (DP 2); output in $WORK/NAME.out, returns run's status
  local name=$1
  shift
  timeout 120 mpirun -n 2 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" "$@" \
    > "$WORK/$name.out" 2>&1
}

for start in 0 40; do
  if run "long$start" --consumed-samples "$start" --train-iters 100000; then
    cat "$WORK/long$start.out"
    fail "a run of 100000 iterations over a split of a few hundred samples was accepted"
  fi
  msg=$(grep -m1 -- "--train-iters 100000 needs" "$WORK/long$start.out") ||
    { cat "$WORK/long$start.out"; fail "the refusal does not name --train-iters and the need"; }
  echo "consumed $start: $msg"
  grep -q "run out at iteration" <<<"$msg" || fail "the refusal does not say where data runs out"
  # Refused before any step: no rank printed the steady-state line of a run that read data.
  if grep -q "checks: " "$WORK/long$start.out"; then fail "the refused run read data first"; fi
  max=$(sed -E 's/.*lower --train-iters to at most ([0-9]+).*/\1/' <<<"$msg")
  [[ "$max" =~ ^[0-9]+$ ]] || fail "no largest --train-iters in: $msg"
  # What it offers is true: max runs to its end, max + 1 is refused.
  run "max$start" --consumed-samples "$start" --train-iters "$max" ||
    { cat "$WORK/max$start.out"; fail "--train-iters $max (offered as the largest) failed"; }
  grep -q "checks: .* ok" "$WORK/max$start.out" || fail "--train-iters $max: no checks line"
  if run "over$start" --consumed-samples "$start" --train-iters $((max + 1)); then
    fail "--train-iters $((max + 1)) (one past the largest) was accepted"
  fi
  grep -q -- "--train-iters $((max + 1)) needs" "$WORK/over$start.out" ||
    { cat "$WORK/over$start.out"; fail "--train-iters $((max + 1)): not refused at start-up"; }
done
# Sizes whose product overflows 64 bits (each within its flag's range) are named, not wrapped.
if run huge --train-iters 1099511627776 --global-batch-size 16777216; then
  fail "2^40 iterations of 2^24 samples were accepted"
fi
grep -q -- "--train-iters 1099511627776 needs more than 2^63 samples" "$WORK/huge.out" ||
  { cat "$WORK/huge.out"; fail "the need of 2^64 samples is not stated as such"; }
echo "run_length_test: ok"
