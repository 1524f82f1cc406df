#!/usr/bin/env bash
# Faults of a training job found by trying to break it (issue 22; each case failed before its
# fix), under mpirun on the golden corpora:
#  1. a fresh run (no --resume) into a non-empty ledger folder is refused on every rank, naming
#     the folder and --overwrite-ledger, and leaves the folder as it was; --overwrite-ledger
#     replaces it; a resume continues it;
#  2. a ledger folder locked by another process (another job) is refused, naming the folder and
#     the holder, before anything in it changes;
#  3. gridfeed bench --samples has an upper bound (10^12 ran for hours);
#  4. a checkpoint beyond --train-iters ends at once and says so;
#  5. the toy trainer (when given): the same ledger refusal, and an amended mixture schedule
#     resumed with a ledger continues it (it opened the ledger without the schedule history);
#  6. a reader's read error reaches its TP peers as an error (status first), no one waits;
#  7. a ledger write failure ends every rank with the message, before a checkpoint covers it;
#  8. a NUL in a path option (from YAML) is refused naming the flag.
# Every command runs under `timeout`: a hang fails the test instead of blocking CI.
# Usage: job_faults_test.sh GRIDFEED GOLDEN_DIR [TOY_TRAINER]
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
TRAINER=${3:+$(realpath "$3")}
WORK=$(mktemp -d /tmp/gridfeed_jobfaults.XXXXXX)
HOLDER=""
cleanup() {
  if [ -n "$HOLDER" ]; then kill "$HOLDER" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
MPI=(timeout -k 5 120 mpirun --oversubscribe -n 2)
D=(--data-path corpora/corpus_u16 --split 98,2,0 --seq-length 64 --train-samples 400
   --valid-samples 10 --micro-batch-size 2)

# expect_error LOG RC RANKS PATTERN...: failed (not by timeout), every rank printed each PATTERN.
expect_error() {
  local log=$1 rc=$2 ranks=$3
  shift 3
  [ "$rc" -ne 0 ] || { cat "$log"; fail "$log: the job succeeded"; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { cat "$log"; fail "$log: the job hung"; }
  for p in "$@"; do
    local n
    n=$(grep -c -F -- "$p" "$log" || true)
    [ "$n" -ge "$ranks" ] || { cat "$log"; fail "$log: '$p' printed by $n of $ranks ranks"; }
  done
}
# run_job LOG CMD...: runs it, leaves its exit status in $rc.
run_job() {
  local log=$1
  shift
  set +e
  "$@" > "$log" 2>&1
  rc=$?
  set -e
}
snapshot() { (cd "$1" && for f in dp*.tsv; do echo "== $f"; cat "$f"; done); }

# 1. A fresh run into a non-empty ledger.
L=$WORK/ledger
"${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 4 --save "$WORK/ck.h5" --ledger "$L" \
  > "$WORK/first.log" 2>&1 || { cat "$WORK/first.log"; fail "first run"; }
snapshot "$L" > "$WORK/before.txt"
run_job "$WORK/fresh.log" "${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 4 --ledger "$L"
expect_error "$WORK/fresh.log" $rc 2 "ledger folder '$L' already holds a ledger" \
  "--overwrite-ledger"
snapshot "$L" | cmp -s - "$WORK/before.txt" || fail "the refused run changed the ledger"
# At another DP size the ranks whose files do not exist yet refuse as well (agreed).
run_job "$WORK/fresh_dp1.log" timeout -k 5 120 mpirun -n 1 "$GRIDFEED" run "${D[@]}" \
  --train-iters 2 --ledger "$L"
expect_error "$WORK/fresh_dp1.log" $rc 1 "already holds a ledger"
snapshot "$L" | cmp -s - "$WORK/before.txt" || fail "the refused DP-1 run changed the ledger"
# A resume continues the ledger; audit verify proves it.
"${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 6 --resume "$WORK/ck.h5" --ledger "$L" \
  > "$WORK/resume.log" 2>&1 || { cat "$WORK/resume.log"; fail "resume into the ledger"; }
"$GRIDFEED" audit verify --ledger "$L" > "$WORK/verify.log" 2>&1 \
  || { cat "$WORK/verify.log"; fail "verify after the resume"; }
grep -q "positions \[0, 24) consumed exactly once" "$WORK/verify.log" \
  || { cat "$WORK/verify.log"; fail "verify range after the resume"; }
# --overwrite-ledger replaces it (another seed: another configuration) at DP 1.
timeout -k 5 120 mpirun -n 1 "$GRIDFEED" run "${D[@]}" --seed 7 --train-iters 3 --ledger "$L" \
  --overwrite-ledger > "$WORK/overwrite.log" 2>&1 || { cat "$WORK/overwrite.log"; fail "overwrite"; }
[ ! -e "$L/dp1.tsv" ] || fail "--overwrite-ledger kept the file of a DP rank the run lacks"
"$GRIDFEED" audit verify --ledger "$L" > "$WORK/verify2.log" 2>&1 \
  || { cat "$WORK/verify2.log"; fail "verify after --overwrite-ledger"; }
grep -q "positions \[0, 6) consumed exactly once" "$WORK/verify2.log" \
  || { cat "$WORK/verify2.log"; fail "verify range after --overwrite-ledger"; }

# 2. Another process holds the folder's lock (as a running job's writer does).
/usr/bin/python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a+")
fcntl.flock(f, fcntl.LOCK_EX)
f.truncate(0); f.write("host testhost pid 4242\n"); f.flush()
print("held", flush=True)
time.sleep(300)' "$L/dp0.tsv.lock" > "$WORK/holder.out" &
HOLDER=$!
for _ in $(seq 100); do grep -q held "$WORK/holder.out" && break; sleep 0.1; done
grep -q held "$WORK/holder.out" || fail "the lock holder did not start"
snapshot "$L" > "$WORK/before_lock.txt"
run_job "$WORK/locked.log" "${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 2 --ledger "$L" \
  --overwrite-ledger
expect_error "$WORK/locked.log" $rc 2 "ledger folder '$L' is in use by another job" \
  "held by host testhost pid 4242"
snapshot "$L" | cmp -s - "$WORK/before_lock.txt" || fail "a run changed a locked ledger"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
HOLDER=""

# 3. bench --samples is bounded, naming the flag.
for n in 1000000000000 99999999999999999999; do
  run_job "$WORK/bench_$n.log" timeout -k 5 60 "$GRIDFEED" bench "${D[@]}" --samples "$n"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/bench_$n.log"; fail "bench --samples $n: rc $rc"; }
  grep -q -- "--samples" "$WORK/bench_$n.log" || { cat "$WORK/bench_$n.log"; fail "bench --samples $n: flag not named"; }
done

# 4. A checkpoint at iteration 4 with --train-iters 2: nothing to run, and it says so.
"${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 2 --resume "$WORK/ck.h5" \
  > "$WORK/past.log" 2>&1 || { cat "$WORK/past.log"; fail "resume past --train-iters"; }
grep -q "nothing to run: the checkpoint is at iteration 4, --train-iters is 2" "$WORK/past.log" \
  || { cat "$WORK/past.log"; fail "resume past --train-iters: not said"; }

# 6. A reader's read error (injected at position 5: DP rank 0's second micro-batch) reaches its
#    TP peer instead of data: both print it, nobody waits, the job fails.
run_job "$WORK/read.log" timeout -k 5 120 mpirun --oversubscribe -n 4 "$GRIDFEED" run "${D[@]}" \
  --tensor-model-parallel-size 2 --train-iters 4 --testing-fail-read-position 5
expect_error "$WORK/read.log" $rc 2 "cannot read sample 5 of the train split (injected by test)"
grep -q "reader world rank 0" "$WORK/read.log" || { cat "$WORK/read.log"; fail "the reader not named"; }

# 7. A ledger write failure (injected: a writer's third record, in iteration 2) is agreed at the
#    next flush: every rank prints it and exits 1 (no MPI_Abort), and no checkpoint covers it.
run_job "$WORK/lw.log" "${MPI[@]}" "$GRIDFEED" run "${D[@]}" --train-iters 4 --save-interval 2 \
  --save "$WORK/lw.h5" --ledger "$WORK/lw" --testing-fail-ledger-record 3
expect_error "$WORK/lw.log" $rc 2 "the ledger at iteration 2" "cannot write ledger record 3"
if grep -q "MPI_ABORT" "$WORK/lw.log"; then cat "$WORK/lw.log"; fail "ledger failure: MPI_Abort"; fi
[ ! -e "$WORK/lw.h5" ] || fail "a checkpoint was written past a failed ledger write"

# 8. A NUL in a path from YAML ("\0") is refused naming the flag (it wrote the truncated name).
printf 'ledger: "%s/nul\\0x"\n' "$WORK" > "$WORK/nul.yaml"
run_job "$WORK/nul.log" "${MPI[@]}" "$GRIDFEED" run "${D[@]}" --config "$WORK/nul.yaml" \
  --train-iters 2
expect_error "$WORK/nul.log" $rc 2 "--ledger holds a NUL character"
[ ! -e "$WORK/nul" ] || fail "a NUL path wrote its truncated name"

# 5. The toy trainer shares the ledger's rules, with the schedule history.
if [ -n "$TRAINER" ]; then
  schedule() {  # $1: the anneal stage's mixture
    cat <<YAML
seq-length: 32
split: "969,30,1"
vocab-size: 50000
sources: {u16: corpora/corpus_u16, multi: corpora/corpus_multi}
schedule:
  - {name: main, samples: 64, mixture: {u16: 0.7, multi: 0.3}}
  - {name: anneal, samples: 64, mixture: {$1}}
YAML
  }
  schedule "u16: 0.3, multi: 0.7" > "$WORK/s.yaml"
  schedule "u16: 0.1, multi: 0.9" > "$WORK/future.yaml"
  T=(--micro-batch-size 2 --global-batch-size 8 --layers 1 --d-model 16)
  toy() { timeout -k 5 300 mpirun --oversubscribe -n 2 -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
            "$TRAINER" "${T[@]}" "$@"; }
  TL=$WORK/toy_ledger
  toy --config "$WORK/s.yaml" --train-iters 4 --save "$WORK/toyck" --ledger "$TL" \
    > "$WORK/toy1.log" 2>&1 || { cat "$WORK/toy1.log"; fail "toy trainer: first run"; }
  snapshot "$TL" > "$WORK/toy_before.txt"
  run_job "$WORK/toy_fresh.log" toy --config "$WORK/s.yaml" --train-iters 4 --ledger "$TL"
  expect_error "$WORK/toy_fresh.log" $rc 2 "ledger folder '$TL' already holds a ledger"
  snapshot "$TL" | cmp -s - "$WORK/toy_before.txt" || fail "toy trainer: the refused run changed the ledger"
  toy --config "$WORK/future.yaml" --train-iters 16 --load "$WORK/toyck" --allow-schedule-change \
    --ledger "$TL" > "$WORK/toy2.log" 2>&1 \
    || { cat "$WORK/toy2.log"; fail "toy trainer: amended resume with a ledger"; }
  "$GRIDFEED" audit verify --ledger "$TL" > "$WORK/toy_verify.log" 2>&1 \
    || { cat "$WORK/toy_verify.log"; fail "toy trainer: verify of the amended ledger"; }
  grep -q "under 2 mixture schedules" "$WORK/toy_verify.log" \
    || { cat "$WORK/toy_verify.log"; fail "toy trainer: verify: schedules"; }
  grep -q "positions \[0, 128) consumed exactly once" "$WORK/toy_verify.log" \
    || { cat "$WORK/toy_verify.log"; fail "toy trainer: verify: range"; }
fi
echo "job faults: ok"
