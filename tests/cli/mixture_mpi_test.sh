#!/usr/bin/env bash
# Mixture schedules end to end on the golden corpora: `plan` prints the stage arithmetic and
# the shard figures; a two-stage run with a ramp killed after a checkpoint in the first stage
# and resumed across the stage boundary yields the same ledger as an uninterrupted run (and
# audit verify proves it); an amended schedule is refused without --allow-schedule-change,
# refused when it changes the past (naming the stage), accepted when it changes only the
# future, and the checkpoint then keeps both schedules with the position each took effect.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_mixture.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
schedule() {  # $1: main mixture, $2: anneal mixture
  cat <<YAML
seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32, multi: corpora/corpus_multi}
schedule:
  - {name: main, samples: 96, mixture: {$1}}
  - {name: anneal, samples: 96, mixture: {$2}, ramp_samples: 32}
max_epochs: {multi: 3}
YAML
}
schedule "u16: 0.6, i32: 0.3, multi: 0.1" "u16: 0.2, i32: 0.3, multi: 0.5" > "$WORK/s.yaml"
schedule "u16: 0.6, i32: 0.3, multi: 0.1" "u16: 0.1, i32: 0.1, multi: 0.8" > "$WORK/future.yaml"
schedule "u16: 0.5, i32: 0.4, multi: 0.1" "u16: 0.2, i32: 0.3, multi: 0.5" > "$WORK/past.yaml"

# plan: the stages, shares and verdicts; --json parses; the shard arithmetic.
"$GRIDFEED" plan --config "$WORK/s.yaml" > "$WORK/plan.txt" || fail "plan"
grep -q "stage 'anneal': samples \[96, 192), ramp over 32 samples" "$WORK/plan.txt" \
  || { cat "$WORK/plan.txt"; fail "plan table"; }
"$GRIDFEED" plan --config "$WORK/s.yaml" --json | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
assert [s["name"] for s in p["stages"]] == ["main", "anneal"], p
main = {c["source"]: c for c in p["stages"][0]["sources"]}
assert abs(main["u16"]["samples"] - 57.6) < 1e-9, main' || fail "plan --json"
"$GRIDFEED" plan shards --shards 100 --ranks 8 --workers 4 | grep -q "78.1%" || fail "plan shards"

F=(--config "$WORK/s.yaml" --micro-batch-size 2 --global-batch-size 16 --train-iters 12)
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/full" \
  > "$WORK/full.out" 2>&1 || { cat "$WORK/full.out"; fail "uninterrupted run"; }
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/cut" --save "$WORK/ck.h5" \
  --save-interval 5 --testing-kill-rank 0 --testing-kill-step 8 > "$WORK/kill.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
cp "$WORK/ck.h5" "$WORK/ck5.h5"
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/cut" --resume "$WORK/ck.h5" \
  > "$WORK/resume.out" 2>&1 || { cat "$WORK/resume.out"; fail "resume"; }
grep -q "at iteration 5" "$WORK/resume.out" || fail "did not resume at the checkpoint"
for f in "$WORK"/full/dp*.tsv; do
  cmp <(grep -v '^#' "$f") <(grep -v '^#' "$WORK/cut/$(basename "$f")") \
    || fail "ledger $(basename "$f") differs after kill and resume across the stage boundary"
done
"$GRIDFEED" audit verify --ledger "$WORK/cut" > "$WORK/verify.out" 2>&1 \
  || { cat "$WORK/verify.out"; fail "audit verify"; }
echo "kill + resume across the stage boundary: ledger equals the uninterrupted one"

# Amendments, resumed from the checkpoint at iteration 5 (sample 80, stage 'main').
A=(--micro-batch-size 2 --global-batch-size 16 --train-iters 12 --save "$WORK/amended.h5")
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/future.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" > "$WORK/noflag.out" 2>&1; then
  fail "a changed schedule resumed without --allow-schedule-change"
fi
grep -q "allow-schedule-change" "$WORK/noflag.out" || { cat "$WORK/noflag.out"; fail "message"; }
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/past.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/past.out" 2>&1; then
  fail "an amendment that changes the past was accepted"
fi
grep -q "stage 'main'" "$WORK/past.out" || { cat "$WORK/past.out"; fail "past: stage not named"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/future.yaml" "${A[@]}" \
  --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/future.out" 2>&1 \
  || { cat "$WORK/future.out"; fail "a future-only amendment was refused"; }
h5dump -a /gridfeed/schedule_history "$WORK/amended.h5" > "$WORK/history.txt"
grep -q '"position":80,' "$WORK/history.txt" || { cat "$WORK/history.txt"; fail "history"; }
grep -q '"position":0,' "$WORK/history.txt" || { cat "$WORK/history.txt"; fail "history"; }
echo "cli mixture: ok"
