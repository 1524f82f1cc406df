#!/usr/bin/env bash
# `gridfeed run --fim-data` over MPI with Megatron's DataLoader semantics: one FIM random stream
# per DP rank and DataLoader worker (--num-workers W; worker w fetches micro-batches w, w+W, ...),
# fresh at the run's start and at a resume.
#  1. Every loader run of a FIM golden set (cases/*/loaders: Megatron's own DataLoader, 0 and 2
#     workers): what each DP rank received, micro-batch by micro-batch, equals it.
#  2. DP 2 x PP 2 with 2 workers, also resumed mid-run: each worker's micro-batches equal
#     `gridfeed samples` of their positions in that worker's fetch order (one fresh stream), on
#     the first stage (tokens, position_ids) and the last (labels, loss_mask) alike.
#  3. The ledger of a FIM run killed after a checkpoint and resumed at another DP size: `audit
#     verify` recomputes every record (token hashes of the FIM samples, each run's streams
#     fresh), `audit replay` equals what the resumed run received, and a tampered hash is found.
# Usage: fim_run_mpi_test.sh GRIDFEED GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/fim_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_fim_run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*"; exit 1; }

# --- 1. Megatron's loader runs ---------------------------------------------------------------
runs=0
for case_dir in "$GOLDEN"/cases/*/; do
  case_dir=${case_dir%/}
  [ -d "$case_dir/loaders" ] || continue
  mapfile -t flags < <(/usr/bin/python3 "$FLAGS" "$case_dir")
  mapfile -t loaders < <(/usr/bin/python3 -c '
import json, sys
for k, l in enumerate(json.load(open(sys.argv[1]))["loaders"]):
    print(k, l["num_workers"], l["mbs"], l["dp"], l["consumed"], l["n"])' "$case_dir/case.json")
  for line in "${loaders[@]}"; do
    read -r k workers mbs dp consumed n <<< "$line"
    out="$WORK/$(basename "$case_dir")_l$k"
    mpirun -n "$dp" --oversubscribe "$GRIDFEED" run "${flags[@]}" --num-workers "$workers" \
      --micro-batch-size "$mbs" --global-batch-size $((mbs * dp)) --train-iters "$n" \
      --consumed-samples "$consumed" --dump "$out" > "$out.log" 2>&1 \
      || { cat "$out.log"; fail "run of $(basename "$case_dir") loader l$k"; }
    /usr/bin/python3 - "$case_dir/loaders/l$k" "$out" "$dp" "$n" <<'PY' \
      || fail "$(basename "$case_dir") loader l$k differs from Megatron's DataLoader"
import json, sys
import numpy as np
golden, dump, dp, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for r in range(dp):
    meta = json.load(open(f"{dump}/rank{r}/meta.json"))
    g = f"{golden}/dp_rank_{meta['dp_rank']}"
    for f in ["sample_indices", "tokens", "labels", "loss_mask", "position_ids"]:
        want, got = np.load(f"{g}/{f}.npy"), np.load(f"{dump}/rank{r}/{f}.npy")
        assert got.dtype == want.dtype and got.shape == want.shape, (r, f, got.shape, want.shape)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[:3].tolist()
            raise AssertionError(f"rank {r} {f}: first differences at {bad}")
PY
    runs=$((runs + 1))
  done
done
[ "$runs" -ge 1 ] || fail "no loader runs under $GOLDEN/cases/*/loaders"
echo "fim loaders: $runs DataLoader runs equal, micro-batch by micro-batch"

# --- 2. DP 2 x PP 2, two workers, fresh and resumed ------------------------------------------
case_dir=$(ls -d "$GOLDEN"/cases/*/ | head -n 1)
case_dir=${case_dir%/}
mapfile -t flags < <(/usr/bin/python3 "$FLAGS" "$case_dir")
MBS=2 DP=2 ITERS=5
for consumed in 0 12; do
  out="$WORK/grid_$consumed"
  mpirun -n 4 --oversubscribe "$GRIDFEED" run "${flags[@]}" --num-workers 2 \
    --pipeline-model-parallel-size 2 --micro-batch-size $MBS --global-batch-size $((MBS * DP)) \
    --train-iters $ITERS --consumed-samples $consumed --dump "$out" > "$out.log" 2>&1 \
    || { cat "$out.log"; fail "DP 2 x PP 2 run from $consumed"; }
  # Each (DP rank, worker)'s positions in fetch order, from the dump's sample indices.
  /usr/bin/python3 - "$out" > "$out.streams" <<'PY'
import json, sys
import numpy as np
dump = sys.argv[1]
for r in range(4):
    meta = json.load(open(f"{dump}/rank{r}/meta.json"))
    if meta["pp_rank"] != 0:
        continue
    si = np.load(f"{dump}/rank{r}/sample_indices.npy")
    for w in range(2):
        print(meta["dp_rank"], w, ",".join(str(p) for p in si[w::2].ravel()))
PY
  while read -r dp_rank w positions; do
    "$GRIDFEED" samples "${flags[@]}" --positions "$positions" \
      --out "$out/samples_${dp_rank}_$w" > /dev/null 2> "$out.err" \
      || { cat "$out.err"; fail "samples of DP rank $dp_rank worker $w"; }
  done < "$out.streams"
  /usr/bin/python3 - "$out" "$MBS" <<'PY' || fail "DP 2 x PP 2 run from $consumed differs from the streams"
import json, sys
import numpy as np
dump, mbs = sys.argv[1], int(sys.argv[2])
checked = 0
for r in range(4):
    meta = json.load(open(f"{dump}/rank{r}/meta.json"))
    fields = ["tokens", "position_ids"] if meta["pp_rank"] == 0 else ["labels", "loss_mask"]
    assert meta["fields"] == fields, (r, meta["fields"])
    for w in range(2):
        s = f"{dump}/samples_{meta['dp_rank']}_{w}"
        for f in fields:
            got = np.load(f"{dump}/rank{r}/{f}.npy")[w::2]
            want = np.load(f"{s}/{f}.npy").reshape(got.shape)
            assert np.array_equal(got, want), (r, w, f)
            checked += 1
assert checked == 16, checked
PY
done
echo "fim grid: DP 2 x PP 2 with 2 workers, fresh and resumed at 12, equal to each worker's stream"

# --- 3. Ledger, kill, resume at another DP size, audit -------------------------------------
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${flags[@]}" --micro-batch-size 2 \
  --global-batch-size 8 --train-iters 6 --save "$WORK/ck.h5" --save-interval 2 \
  --ledger "$WORK/ledger" --testing-kill-rank 1 --testing-kill-step 3 > "$WORK/a.out" 2>&1
set -e
[ -f "$WORK/ck.h5" ] || { cat "$WORK/a.out"; fail "no checkpoint before the kill"; }
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${flags[@]}" --micro-batch-size 2 \
  --global-batch-size 8 --train-iters 6 --resume "$WORK/ck.h5" --ledger "$WORK/ledger" \
  --dump "$WORK/resumed" > "$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; fail "FIM resume"; }
"$GRIDFEED" audit verify --ledger "$WORK/ledger" > "$WORK/verify.out" 2>&1 \
  || { cat "$WORK/verify.out"; fail "audit verify of a resumed FIM run"; }
grep -q "positions \[0, 48) consumed exactly once" "$WORK/verify.out" \
  || { cat "$WORK/verify.out"; fail "verify: not every position"; }
"$GRIDFEED" audit replay --ledger "$WORK/ledger" --steps 2:6 --data-parallel-size 2 \
  --micro-batch-size 2 --global-batch-size 8 --out "$WORK/replay" > /dev/null 2>&1 \
  || fail "audit replay of the FIM ledger"
/usr/bin/python3 - "$WORK" <<'PY' || fail "FIM replay differs from what the resumed run received"
import sys
import numpy as np
w = sys.argv[1]
for r in range(2):
    a = np.load(f"{w}/replay/dp_rank{r}/sample_indices.npy")
    b = np.load(f"{w}/resumed/rank{r}/sample_indices.npy")
    assert np.array_equal(a, b), (r, a[:2], b[:2])
PY
cp -r "$WORK/ledger" "$WORK/bad"
line=$(grep -n '^[0-9]' "$WORK/bad/dp1.tsv" | tail -n 1 | cut -d: -f1)
sed -i "${line}s/\t[0-9a-f]*\$/\t0000000000000000/" "$WORK/bad/dp1.tsv"
if "$GRIDFEED" audit verify --ledger "$WORK/bad" > "$WORK/bad.out" 2>&1; then
  fail "a tampered FIM token hash passed"
fi
grep -q "dp1.tsv line $line): token_xxh3" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "tamper not located"; }
echo "fim ledger: killed, resumed at DP 2, audit verify and replay hold, a tampered hash is found"
