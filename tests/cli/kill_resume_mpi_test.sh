#!/usr/bin/env bash
# Kill and resume: at several layouts, a run killed with SIGKILL after a checkpoint and resumed
# yields the same ledger (every rank's samples) as an uninterrupted run; a kill in the middle of
# a checkpoint write leaves the previous checkpoint valid.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_kill.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
F=(--data-path 0.3 corpora/corpus_u16 0.7 corpora/corpus_i32 --split 969,30,1 --seq-length 64
   --train-samples 3000 --valid-samples 100 --test-samples 20 --micro-batch-size 2
   --global-batch-size 16 --train-iters 12)
fail() { echo "FAIL: $*" >&2; exit 1; }

layout=0
for spec in "8|--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" \
            "8|--context-parallel-size 2 --tensor-model-parallel-size 2" \
            "4|"; do
  layout=$((layout + 1))
  n=${spec%%|*}; read -r -a grid <<< "${spec#*|}"
  d="$WORK/l$layout"
  mpirun -n "$n" --oversubscribe "$GRIDFEED" run "${F[@]}" "${grid[@]}" --ledger "$d/full" \
    > "$d.full.out" 2>&1 || { cat "$d.full.out"; fail "uninterrupted run ($spec)"; }
  set +e
  mpirun -n "$n" --oversubscribe "$GRIDFEED" run "${F[@]}" "${grid[@]}" --ledger "$d/cut" \
    --save "$d/ck.h5" --save-interval 5 --testing-kill-rank 0 --testing-kill-step 8 \
    > "$d.kill.out" 2>&1
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "the killed run exited 0 ($spec)"
  mpirun -n "$n" --oversubscribe "$GRIDFEED" run "${F[@]}" "${grid[@]}" --ledger "$d/cut" \
    --resume "$d/ck.h5" > "$d.resume.out" 2>&1 || { cat "$d.resume.out"; fail "resume ($spec)"; }
  grep -q "at iteration 5" "$d.resume.out" || fail "did not resume at the checkpoint ($spec)"
  for f in "$d"/full/dp*.tsv; do
    cmp <(grep -v '^#' "$f") <(grep -v '^#' "$d/cut/$(basename "$f")") \
      || fail "ledger $(basename "$f") differs after kill and resume ($spec)"
  done
  "$GRIDFEED" audit verify --ledger "$d/cut" > /dev/null 2>&1 || fail "verify ($spec)"
  echo "layout $spec: killed + resumed ledger equals the uninterrupted one"
done

# A crash between writing the new checkpoint and renaming it: the old one stays valid.
set +e
mpirun -n 2 --oversubscribe -x GRIDFEED_TESTING_CRASH_BEFORE_RENAME=4 "$GRIDFEED" run "${F[@]}" \
  --save "$WORK/ck.h5" --save-interval 2 > "$WORK/crash.out" 2>&1
set -e
h5dump -d /gridfeed/iteration "$WORK/ck.h5" | grep -q "(0): 2" || fail "previous checkpoint lost"
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${F[@]}" --resume "$WORK/ck.h5" \
  > "$WORK/after.out" 2>&1 || { cat "$WORK/after.out"; fail "resume after a torn write"; }
grep -q "at iteration 2" "$WORK/after.out" || fail "resume did not use the previous checkpoint"
echo "cli kill/resume: ok"
