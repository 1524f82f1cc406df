#!/usr/bin/env bash
# A job's memory limit set on a parent cgroup (Slurm sets it on the job or step, the task's own
# cgroup has none): `gridfeed tables` asked for more than the limit leaves refuses with the
# sizes and what to change (core/memory_usage: AvailableMemoryBytes), instead of being killed
# by the cgroup's OOM killer; the same request fits once the limit is gone.
# Needs root and a writable memory cgroup (v1 memory controller or v2 with memory delegated);
# without one it exits 77, which ctest reports as skipped, never as passed.
# Usage: memory_limit_test.sh GRIDFEED GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_memory_limit.XXXXXX)
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# This shell's memory cgroup folder and the name of its limit file.
if line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup); then
  base=/sys/fs/cgroup/memory${line#*:*:}
  limit_file=memory.limit_in_bytes
elif line=$(grep -E '^0::' /proc/self/cgroup); then
  base=/sys/fs/cgroup${line#0::}
  limit_file=memory.max
  grep -qw memory "$base/cgroup.subtree_control" 2>/dev/null \
    || echo +memory > "$base/cgroup.subtree_control" 2>/dev/null \
    || skip "memory is not delegated below $base"
else
  skip "no memory cgroup"
fi
base=${base%/}
parent=$base/gridfeed_test_$$
child=$parent/task
cleanup() {
  # Processes in the child are done by now; the folders go, children first.
  rmdir "$child" "$parent" 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir "$parent" 2> /dev/null || skip "cannot create a cgroup under $base (not root?)"
[ "$limit_file" = memory.max ] && { echo +memory > "$parent/cgroup.subtree_control" || true; }
mkdir "$child"
echo $((512 * 1024 * 1024)) > "$parent/$limit_file" || skip "cannot set $parent/$limit_file"

# 200M samples of 16 tokens from a 2,001-document corpus: about 2.4 GB of tables.
args=(tables --data-path corpora/corpus_u16 --split 100,0,0 --seq-length 16
      --train-samples 200000000 --out "$WORK/out")
rc=0
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$child" "$GRIDFEED" "${args[@]}" \
  > "$WORK/log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/log"; fail "under a 512 MB limit on the parent: exit $rc, not 1"; }
grep -qE "needs [0-9.]+ GB, more than the 0\.[0-9]+ GB this machine can give" "$WORK/log" \
  || { cat "$WORK/log"; fail "no error naming the sizes"; }
[ ! -e "$WORK/out" ] || fail "wrote $WORK/out"
echo "ok   512 MB limit on the parent cgroup: $(tail -n 1 "$WORK/log")"

# SFT samples of a huge --seq-length (issue 51: a bare std::bad_alloc): refused naming the flag.
SFT=../megatron-sft
sft=(samples --sft --data-path "$SFT/corpora/sft_a.jsonl" --tokenizer-model "$SFT/tokenizers/chat"
     --split 100,0,0 --train-samples 4 --valid-samples 0 --test-samples 0
     --seq-length 100000000 --positions 0 --out "$WORK/sft")
rc=0
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$child" "$GRIDFEED" "${sft[@]}" \
  > "$WORK/log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/log"; fail "samples --sft --seq-length 1e8 under 512 MB: exit $rc"; }
grep -q -- "--seq-length 100000000 for 1 samples needs" "$WORK/log" \
  || { cat "$WORK/log"; fail "no error naming --seq-length and the size"; }
echo "ok   samples --sft --seq-length 1e8 under 512 MB: $(tail -n 1 "$WORK/log")"
