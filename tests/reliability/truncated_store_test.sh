#!/usr/bin/env bash
# A store truncated while `gridfeed run` reads it (issue 51 item 8; each case failed before its
# fix: every rank died of SIGBUS with no message):
#  1. a .bin truncated on one reader only (node-local copies): that rank names the file, the
#     offset and that it changed under the job, and the whole job ends (the other rank too);
#  2. the JSON Lines file of `run --sft` truncated under two readers: the same message.
# The truncation waits for rank 0's last start-up line (the readers are then past their checks
# and reading, as long as --train-iters lasts). Every mpirun runs under `timeout`: a hang fails
# the test instead of blocking CI.
# Usage: truncated_store_test.sh GRIDFEED GOLDEN_DIR (tests/golden: megatron/ and megatron-sft/)
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_truncated.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export GRIDFEED_LOG_LEVEL=DEBUG
fail() { echo "FAIL: $*" >&2; exit 1; }
MPI=(timeout -k 5 120 mpirun --oversubscribe -x GRIDFEED_LOG_LEVEL)
FOREVER=(--dataloader-type cyclic --train-iters 1000000000)

# truncate_while_running LOG FILE SIZE -- MPIRUN_ARGS...: starts the job, truncates FILE to SIZE
# bytes once rank 0 has started up, and returns the job's exit status.
truncate_while_running() {
  local log=$1 file=$2 size=$3
  shift 4
  "${MPI[@]}" "$@" > "$log" 2>&1 &
  local job=$! i
  for i in $(seq 600); do
    grep -q "start-up phase plan schedule" "$log" && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "start-up phase plan schedule" "$log" || { cat "$log"; fail "$log: never started"; }
  sleep 0.5
  truncate -s "$size" "$file"
  set +e
  wait "$job"
  local rc=$?
  set -e
  return $rc
}

# expect_fault LOG RC PATTERN: failed (not by timeout, not by the signal), PATTERN printed.
expect_fault() {
  local log=$1 rc=$2 pattern=$3
  [ "$rc" -ne 0 ] || { cat "$log"; fail "$log: the job succeeded"; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { cat "$log"; fail "$log: the job hung"; }
  grep -q -- "$pattern" "$log" || { cat "$log"; fail "$log: '$pattern' not printed"; }
  if grep -qi "bus error\|signal 7" "$log"; then cat "$log"; fail "$log: died of SIGBUS"; fi
}

# 1. A .bin truncated on rank 1's node only: rank 0 reads its own intact copy.
for d in a b; do
  mkdir -p "$WORK/$d/corpora"
  cp "$GOLDEN/megatron/corpora/corpus_i32.idx" "$WORK/$d/corpora/x.idx"
  cp "$GOLDEN/megatron/corpora/corpus_i32.bin" "$WORK/$d/corpora/x.bin"
done
F=(run --data-path corpora/x --split 98,2,0 --seq-length 64 --train-samples 400
   --valid-samples 10 --micro-batch-size 2 "${FOREVER[@]}")
rc=0
truncate_while_running "$WORK/bin.log" "$WORK/b/corpora/x.bin" 4096 -- \
  -n 1 -wdir "$WORK/a" "$GRIDFEED" "${F[@]}" : -n 1 -wdir "$WORK/b" "$GRIDFEED" "${F[@]}" || rc=$?
expect_fault "$WORK/bin.log" $rc \
  "gridfeed: error (rank 1): 'corpora/x.bin' changed under the job (truncated while mapped: a read at offset [0-9]* faulted; it is now 4096 bytes, 1177176 when mapped)"
if grep -q "gridfeed: error (rank 0)" "$WORK/bin.log"; then
  cat "$WORK/bin.log"
  fail "rank 0's intact copy reported a fault"
fi

# 2. The JSON Lines file of an SFT run, shared by both readers.
mkdir -p "$WORK/sft"
cp "$GOLDEN/megatron-sft/corpora/sft_b.jsonl" "$WORK/sft/x.jsonl"
cd "$WORK/sft"
rc=0
truncate_while_running "$WORK/sft.log" "$WORK/sft/x.jsonl" 100 -- -n 2 "$GRIDFEED" run --sft \
  --data-path x.jsonl --split 100,0,0 --train-samples 50 --seq-length 64 \
  --tokenizer-model "$GOLDEN/megatron-sft/tokenizers/chat" "${FOREVER[@]}" || rc=$?
expect_fault "$WORK/sft.log" $rc \
  "'x.jsonl' changed under the job (truncated while mapped: a read at offset [0-9]* faulted; it is now 100 bytes, 86524 when mapped)"
echo "truncated stores: ok"
