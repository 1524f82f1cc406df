#!/usr/bin/env bash
# `gridfeed run` under mpirun: a 2x2x1x2 grid with --dump checked from outside, a rank killed
# mid-run (the job must end, non-zero, well within the timeout), and a missing token file.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }

# The first golden case (by name) with Megatron's DataLoader micro-batches of the train split:
# its name, DP size, micro-batch size and consumed samples, and its flags.
read -r CASE DP MBS CONSUMED < <(/usr/bin/python3 - "$GOLDEN/cases" <<'PY'
import json, os, sys
root = sys.argv[1]
for name in sorted(os.listdir(root)):
    c = json.load(open(os.path.join(root, name, "case.json")))
    b = c.get("batches")
    if b and b.get("split") == "train" and c["inputs"]["data_path"] is not None:
        print(name, b["dp"], b["mbs"], b["consumed"])
        break
PY
)
[ -n "${CASE:-}" ] || fail "no golden case has DataLoader micro-batches of the train split"
mapfile -t FLAGS < <(/usr/bin/python3 "$(dirname "$(realpath "$0")")/golden_flags.py" \
  "$GOLDEN/cases/$CASE" --batches)
[ "${#FLAGS[@]}" -gt 0 ] || fail "no flags for case $CASE"
echo "case $CASE: ${FLAGS[*]}"

# 1. TP 2 x PP 2 x CP 1 x DP (Megatron's) with a dump: first stage got inputs, last stage
#    targets, TP peers the same bytes, and the DP ranks' samples equal Megatron's golden
#    micro-batches (two micro-batches per global batch).
mpirun -n $((4 * DP)) --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --global-batch-size $((2 * MBS * DP)) --train-iters 4 --consumed-samples "$CONSUMED" \
  --dump "$WORK/dump" > "$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "run failed"; }
grep -q "checks: .* ok" "$WORK/run.out" || fail "no checks line"
/usr/bin/python3 - "$WORK/dump" "$GOLDEN/cases/$CASE/batches" $((4 * DP)) <<'PY'
import json, os, sys
import numpy as np
dump, golden, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
metas = {r: json.load(open(f"{dump}/rank{r}/meta.json")) for r in range(world)}
for r, m in metas.items():
    d = f"{dump}/rank{r}"
    want = ["tokens", "position_ids"] if m["pp_rank"] == 0 else ["labels", "loss_mask"]
    assert m["fields"] == want, (r, m)
    g = f"{golden}/dp_rank_{m['dp_rank']}"
    gi = np.load(f"{g}/sample_indices.npy")
    si = np.load(f"{d}/sample_indices.npy")
    n = min(len(gi), len(si))
    assert n > 0, r
    assert np.array_equal(si[:n], gi[:n]), r
    for f in want:
        gf = f"{g}/{f}.npy"
        if f == "loss_mask" and os.path.exists(f"{g}/loss_mask_without_cache_leak.npy"):
            gf = f"{g}/loss_mask_without_cache_leak.npy"
        ours, theirs = np.load(f"{d}/{f}.npy"), np.load(gf)
        assert ours.dtype == theirs.dtype and np.array_equal(ours[:n], theirs[:n]), (r, f)
    peer = r ^ 1  # the other TP rank of the group (tp varies fastest)
    for f in want:
        assert np.array_equal(np.load(f"{d}/{f}.npy"), np.load(f"{dump}/rank{peer}/{f}.npy"))
print("dump ok")
PY

# 2. A rank killed mid-run ends the whole job quickly with a non-zero status.
start=$(date +%s)
set +e
timeout 120 mpirun -n 4 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" --train-iters 50 \
  --testing-kill-rank 2 --testing-kill-step 5 > "$WORK/kill.out" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "job with a killed rank exited 0"
[ "$rc" -ne 124 ] || fail "job with a killed rank hung until the timeout"
[ "$elapsed" -lt 60 ] || fail "job took ${elapsed}s to end"
echo "killed rank: job ended with status $rc after ${elapsed}s"

# 3. A missing corpus: every rank prints the same clear error and the job exits non-zero.
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run --data-path corpora/none --seq-length 8 \
  --train-iters 1 > "$WORK/missing.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "missing corpus accepted"
n=$(grep -c "rank 0 (table build).*corpora/none.idx" "$WORK/missing.out" || true)
[ "$n" -eq 4 ] || { cat "$WORK/missing.out"; fail "expected the same error on 4 ranks, got $n"; }
echo "cli run: ok"
