#!/usr/bin/env bash
# Resume from the HDF5 cursor under mpirun: same grid and a changed DP size continue the exact
# global sample sequence of an uninterrupted run; a changed data order, a changed global batch
# size and a corrupt checkpoint are refused with clear messages.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_resume.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
F=(--data-path 0.3 corpora/corpus_u16 0.7 corpora/corpus_i32 --split 969,30,1 --seq-length 64
   --train-samples 3000 --valid-samples 100 --test-samples 20 --micro-batch-size 2)
fail() { echo "FAIL: $*" >&2; exit 1; }
# Global batch size 8 unless the call names another.
run() {
  local n=$1; shift
  local gbs=(--global-batch-size 8)
  [[ " $* " == *" --global-batch-size "* ]] && gbs=()
  mpirun -n "$n" --oversubscribe "$GRIDFEED" run "${F[@]}" "${gbs[@]}" "$@"
}

run 4 --train-iters 10 --dump "$WORK/full" > "$WORK/full.out" 2>&1 || { cat "$WORK/full.out"; fail "full run"; }
run 4 --train-iters 5 --save "$WORK/ck.h5" > /dev/null 2>&1 || fail "first half"
h5dump -g /gridfeed "$WORK/ck.h5" | grep -q consumed_train_samples || fail "h5dump cannot show the cursor"
run 4 --train-iters 10 --resume "$WORK/ck.h5" --dump "$WORK/same" > "$WORK/same.out" 2>&1 || { cat "$WORK/same.out"; fail "resume"; }
grep -q "resumed from .* at iteration 5, 40 consumed samples" "$WORK/same.out" || fail "no resume line"
run 2 --train-iters 10 --resume "$WORK/ck.h5" --dump "$WORK/dp2" > /dev/null 2>&1 || fail "resume at DP 2"
/usr/bin/python3 - "$WORK" <<'PY'
import sys
import numpy as np
w = sys.argv[1]
def steps(d, ranks):
    # Global sample positions per micro-batch step, and tokens per position.
    pos, tok = [], {}
    for r in range(ranks):
        si = np.load(f"{w}/{d}/rank{r}/sample_indices.npy")
        t = np.load(f"{w}/{d}/rank{r}/tokens.npy")
        pos.extend(si.ravel().tolist())
        for p, row in zip(si.ravel(), t.reshape(-1, t.shape[-1])):
            tok[int(p)] = row
    return sorted(pos), tok
full, ftok = steps("full", 4)
same, stok = steps("same", 4)
dp2, dtok = steps("dp2", 2)
assert same == full[40:], (same[:8], full[40:48])
assert dp2 == full[40:], (dp2[:8], full[40:48])
for p in same:
    assert np.array_equal(stok[p], ftok[p]) and np.array_equal(dtok[p], ftok[p]), p
print("resume: same grid and DP 2 continue the uninterrupted sequence exactly")
PY

# Node windows (--node-window reads: each node holds only what its readers read from the
# cursor): saved on 2 simulated nodes at DP 4, resumed on 2 nodes at DP 2. The checkpoint's
# per-source counts (world rank 0's node keeps the source of every position) and the resumed
# data equal the whole image's.
run 4 --train-iters 5 --save "$WORK/ck_nw.h5" --node-window reads --testing-ranks-per-node 2 \
  > "$WORK/nw.out" 2>&1 || { cat "$WORK/nw.out"; fail "first half with node windows"; }
counts() { h5dump -d /gridfeed/source_consumed_samples "$1" | grep -A2 "DATA {"; }
[ -n "$(counts "$WORK/ck.h5")" ] && [ "$(counts "$WORK/ck.h5")" = "$(counts "$WORK/ck_nw.h5")" ] ||
  { counts "$WORK/ck.h5"; counts "$WORK/ck_nw.h5"; fail "node windows: other per-source counts"; }
run 2 --train-iters 10 --resume "$WORK/ck_nw.h5" --node-window reads --testing-ranks-per-node 1 \
  --dump "$WORK/dp2nw" > "$WORK/nw.out" 2>&1 || { cat "$WORK/nw.out"; fail "resume with node windows"; }
diff -r "$WORK/dp2" "$WORK/dp2nw" > /dev/null || fail "node windows: resumed data differs at DP 2"
echo "resume with node windows at another DP size: the same data and cursor"
# Splits with token files of their own: a checkpoint saved with node windows (which hold the
# train split only) resumes on one node with the whole image, and the other way round; the
# token files the cursor names are every split's either way.
S=(--train-data-path corpora/corpus_u16 --valid-data-path corpora/corpus_i32
   --test-data-path corpora/corpus_i32 --split 100,0,0 --seq-length 64 --train-samples 3000
   --valid-samples 100 --test-samples 20 --micro-batch-size 2 --global-batch-size 8)
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${S[@]}" --train-iters 3 --save "$WORK/ck_split_nw.h5" \
  --testing-ranks-per-node 1 > "$WORK/nw.out" 2>&1 || { cat "$WORK/nw.out"; fail "save, node windows"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${S[@]}" --train-iters 3 --save "$WORK/ck_split.h5" \
  > "$WORK/nw.out" 2>&1 || { cat "$WORK/nw.out"; fail "save, whole image"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${S[@]}" --train-iters 5 --resume "$WORK/ck_split_nw.h5" \
  > "$WORK/nw.out" 2>&1 || { cat "$WORK/nw.out"; fail "node-window checkpoint resumed on one node"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${S[@]}" --train-iters 5 --resume "$WORK/ck_split.h5" \
  --testing-ranks-per-node 1 > "$WORK/nw.out" 2>&1 ||
  { cat "$WORK/nw.out"; fail "whole-image checkpoint resumed with node windows"; }
echo "splits with their own token files: checkpoints resume across --node-window modes"

expect_error() {  # pattern, args...
  local pattern=$1; shift
  if run 2 "$@" > "$WORK/err.out" 2>&1; then fail "accepted: $*"; fi
  grep -q "$pattern" "$WORK/err.out" || { cat "$WORK/err.out"; fail "no '$pattern'"; }
}
expect_error "seed: 1234 -> 99" --seed 99 --train-iters 10 --resume "$WORK/ck.h5"
expect_error "allow-batch-size-change" --global-batch-size 4 --train-iters 10 --resume "$WORK/ck.h5"
run 2 --global-batch-size 4 --allow-batch-size-change --train-iters 12 --resume "$WORK/ck.h5" \
  > /dev/null 2>&1 || fail "--allow-batch-size-change"
cp "$WORK/ck.h5" "$WORK/bad.h5"
/usr/bin/python3 -c "
import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2:]=b'\0'*(len(b)-len(b)//2); open(p,'wb').write(b)" "$WORK/bad.h5"
before=$(sha256sum "$WORK/bad.h5")
expect_error "DataLoss" --train-iters 10 --resume "$WORK/bad.h5" --save "$WORK/bad.h5"
[ "$before" = "$(sha256sum "$WORK/bad.h5")" ] || fail "corrupt checkpoint was overwritten"
echo "cli resume: ok"
