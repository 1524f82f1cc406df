#!/usr/bin/env bash
# The ledger and `gridfeed audit`: a run killed after a checkpoint and resumed at another DP
# size appends to its ledger; verify proves exactly-once consumption and catches a changed,
# missing or repeated record; replay reproduces what run --dump recorded; accounting reports.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_audit.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
F=(--data-path 0.3 corpora/corpus_u16 0.7 corpora/corpus_i32 --split 969,30,1 --seq-length 64
   --train-samples 3000 --valid-samples 100 --test-samples 20 --micro-batch-size 2
   --global-batch-size 8)
fail() { echo "FAIL: $*" >&2; exit 1; }

# A run that dies (SIGKILL) after its checkpoint at iteration 4, resumed at DP 2 to 10.
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --train-iters 10 --save "$WORK/ck.h5" \
  --save-interval 4 --ledger "$WORK/ledger" --testing-kill-rank 1 --testing-kill-step 6 \
  > "$WORK/a.out" 2>&1
set -e
[ -f "$WORK/ck.h5" ] || fail "no checkpoint before the kill"
# Records read after the checkpoint may have reached the file; the resumed run drops them.
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${F[@]}" --train-iters 10 --resume "$WORK/ck.h5" \
  --ledger "$WORK/ledger" --dump "$WORK/dump" > "$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; fail "resume"; }
"$GRIDFEED" audit verify --ledger "$WORK/ledger" 2>/dev/null | tee "$WORK/verify.out"
grep -q "positions \[0, 80) consumed exactly once" "$WORK/verify.out" || fail "verify"

# A run started with --consumed-samples 16 (no checkpoint): verify proves the positions from 16
# on when told so (--from 16); without it, it names where the ledger begins and fails, and so it
# does for a ledger cut at its front with its segment lines raised to match.
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${F[@]}" --train-iters 3 --consumed-samples 16 \
  --ledger "$WORK/ledger16" > "$WORK/c.out" 2>&1 || { cat "$WORK/c.out"; fail "run from 16"; }
"$GRIDFEED" audit verify --ledger "$WORK/ledger16" --from 16 > "$WORK/verify16.out" 2>&1 ||
  { cat "$WORK/verify16.out"; fail "verify of a run started at 16"; }
grep -q "positions \[16, 40) consumed exactly once" "$WORK/verify16.out" ||
  { cat "$WORK/verify16.out"; fail "verify from 16"; }
if "$GRIDFEED" audit verify --ledger "$WORK/ledger16" > "$WORK/verify16b.out" 2>&1; then
  fail "verify from 0 of a ledger that begins at 16 passed"
fi
grep -q "the ledger begins at position 16 .*give --from 16" "$WORK/verify16b.out" ||
  { cat "$WORK/verify16b.out"; fail "no 'begins at position 16'"; }
cp -r "$WORK/ledger16" "$WORK/cut16"
for f in "$WORK"/cut16/dp*.tsv; do  # drop its first iteration (2: 16 / 8), raise the segment
  awk -F'\t' '/^#/ || $1 != 2' "$f" | sed 's/start_consumed=16/start_consumed=24/' > "$f.new"
  mv "$f.new" "$f"
done
[ "$(grep -c . "$WORK/cut16/dp0.tsv")" -lt "$(grep -c . "$WORK/ledger16/dp0.tsv")" ] ||
  fail "the cut removed no record"
if "$GRIDFEED" audit verify --ledger "$WORK/cut16" --from 16 > "$WORK/cut16.out" 2>&1; then
  fail "a ledger cut at its front passed"
fi
grep -q "the ledger begins at position 24" "$WORK/cut16.out" || { cat "$WORK/cut16.out"; fail "cut"; }

# replay reproduces the positions the resumed ranks received.
"$GRIDFEED" audit replay --ledger "$WORK/ledger" --steps 4:10 --data-parallel-size 2 --micro-batch-size 2 --global-batch-size 8 \
  --out "$WORK/replay" > /dev/null 2>&1
/usr/bin/python3 - "$WORK" <<'PY'
import sys
import numpy as np
w = sys.argv[1]
for r in range(2):
    a = np.load(f"{w}/replay/dp_rank{r}/sample_indices.npy")
    b = np.load(f"{w}/dump/rank{r}/sample_indices.npy")
    assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b), (r, a[:2], b[:2])
print("replay: equals what run --dump recorded")
PY

# Accounting: shares follow the 0.3/0.7 weights.
"$GRIDFEED" audit accounting --ledger "$WORK/ledger" --json --plot "$WORK/acc.svg" \
  2>/dev/null > "$WORK/acc.json"
/usr/bin/python3 - "$WORK/acc.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert [s["samples"] for s in a] == [24, 56], a
assert abs(a[0]["share"] - 0.3) < 1e-9 and abs(a[1]["target_weight"] - 0.7) < 1e-9, a
print("accounting ok")
PY
grep -q "<polyline" "$WORK/acc.svg" || fail "no plot"

# Tampering is found and located.
check_fails() {  # pattern, then a sed program applied to dp1.tsv
  cp -r "$WORK/ledger" "$WORK/bad"
  sed -i "$2" "$WORK/bad/dp1.tsv"
  if "$GRIDFEED" audit verify --ledger "$WORK/bad" > "$WORK/bad.out" 2>&1; then fail "tamper '$2' passed"; fi
  grep -q "$1" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no '$1'"; }
  rm -rf "$WORK/bad"
}
# (line 5 is the first run's segment line, line 7 the record of position 3)
check_fails "iteration 0 micro-batch 0 dp_rank 1 position 3 (.*dp1.tsv line 7): token_xxh3" '7s/\t[0-9a-f]*$/\t0000000000000000/'
# A missing or repeated record breaks the read schedule at the line after it.
check_fails "dp1.tsv line 7: recorded .*, the read schedule gives .* position 3$" '7d'
check_fails "dp1.tsv line 8: recorded .* position 3, the read schedule gives" '7p'
echo "cli audit: ok"
