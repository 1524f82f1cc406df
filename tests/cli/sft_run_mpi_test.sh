#!/usr/bin/env bash
# `mpirun gridfeed run --sft --dump` against Megatron's get_batch for --sft (golden set): every
# rank of a TP 2 x PP 2 x CP 2 grid gets what get_batch_on_this_tp_rank + flatten + the THD CP
# slice leave on it (probes pp1_cp2_mbs2 and pp2_first_cp2, whose CP index sets also give the
# last stage's labels and loss mask), and a TP 2 x PP 2 grid at CP 1 gets every flattened
# micro-batch of case boundary_L32.
# Usage: sft_run_mpi_test.sh GRIDFEED GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/sft_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_sft_run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"

mapfile -t cp2 < <(/usr/bin/python3 "$FLAGS" cases/cp2_h_aligned_L128)
timeout 300 mpirun --oversubscribe -np 8 "$GRIDFEED" run "${cp2[@]}" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --dump "$WORK/cp2" \
  --ledger "$WORK/ledger" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; echo "FAIL: run --sft at CP 2"; exit 1; }
# PP 4 x CP 2: the middle stages read too and get cu_seqlens and max_seqlen alone (probe
# pp4_middle_cp2: Megatron's middle stages read data under --sft).
timeout 300 mpirun --oversubscribe -np 8 "$GRIDFEED" run "${cp2[@]}" \
  --pipeline-model-parallel-size 4 \
  --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --dump "$WORK/pp4" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; echo "FAIL: run --sft at PP 4 x CP 2"; exit 1; }
mapfile -t b32 < <(/usr/bin/python3 "$FLAGS" cases/boundary_L32)
timeout 300 mpirun --oversubscribe -np 4 "$GRIDFEED" run "${b32[@]}" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --micro-batch-size 3 --global-batch-size 3 --train-iters 3 --dump "$WORK/b32" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; echo "FAIL: run --sft at CP 1"; exit 1; }

# The ledger of the CP 2 run verifies offline (the audit has no grid: the packing's CP size
# travels with the data options), and a changed record does not.
"$GRIDFEED" audit verify --ledger "$WORK/ledger" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; echo "FAIL: audit verify of an SFT run at CP 2"; exit 1; }
sed -i '0,/^0\t/s/^0\t\(.*\)\t[0-9a-f]*$/0\t\1\t0123456789abcdef/' "$WORK/ledger/dp0.tsv"
if "$GRIDFEED" audit verify --ledger "$WORK/ledger" > "$WORK/log" 2>&1; then
  echo "FAIL: audit verify accepted a changed SFT record"; exit 1
fi
grep -q 'token_xxh3 differs' "$WORK/log" || { cat "$WORK/log"; echo "FAIL: audit message"; exit 1; }

# A row Megatron fails on (an assistant message without content) ends the whole job, no rank
# waiting; the reader's TP group names the file and row (DP rank 1 reads position 3; the other
# DP rank is ended by the abort, as for any read error: feed/feeder.h).
head -3 corpora/sft_a.jsonl > "$WORK/bad.jsonl"
echo '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}' >> "$WORK/bad.jsonl"
tail -n +4 corpora/sft_a.jsonl >> "$WORK/bad.jsonl"
set +e
timeout 120 mpirun --oversubscribe -np 4 "$GRIDFEED" run --sft --data-path "$WORK/bad.jsonl" \
  --split 100,0,0 --train-samples 8 --valid-samples 0 --test-samples 0 --seq-length 64 \
  --tokenizer-model tokenizers/chat --tensor-model-parallel-size 2 --micro-batch-size 1 \
  --train-iters 4 > "$WORK/log" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$WORK/log"; echo "FAIL: bad row: rc $rc"; exit 1; }
for r in 2 3; do
  grep -q "error: rank $r .*reader world rank 2 .*bad.jsonl row 3" "$WORK/log" \
    || { cat "$WORK/log"; echo "FAIL: rank $r did not name the bad row"; exit 1; }
done

/usr/bin/python3 - "$WORK" <<'PY'
import json, os, sys
import numpy as np
work = sys.argv[1]

def rank_dumps(d):
    for r in sorted(os.listdir(d)):
        meta = json.load(open(os.path.join(d, r, "meta.json")))
        yield meta, (lambda f, r=r: np.load(os.path.join(d, r, f + ".npy")))

def cu_of(load, mb):
    n = load("num_cu_seqlens")
    start = int(n[:mb].sum())
    return load("cu_seqlens")[start:start + int(n[mb])]

def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (what, a.dtype, b.dtype)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert np.array_equal(a, b), what

checked = 0
# CP 2: micro-batch 0 is probe pp1_cp2_mbs2's source, micro-batch 1 pp2_first_cp2's.
case = "cases/cp2_h_aligned_L128/batches/b0/dp_rank_0"
for meta, load in rank_dumps(work + "/cp2"):
    stage = "first" if meta["pp_rank"] == 0 else "last"
    assert meta["packed"] and meta["micro_batches"] == 2, meta
    for mb, probe in ((0, "pp1_cp2_mbs2"), (1, "pp2_first_cp2")):
        g = f"get_batch/{probe}/cp_rank_{meta['cp_rank']}"
        flat = f"{case}/mb_{mb:02d}/flattened"
        index = np.load(g + "/index.npy")
        same(cu_of(load, mb), np.load(g + "/cu_seqlens.npy")[0], (meta["world_rank"], mb, "cu"))
        assert load("max_seqlen")[mb] == np.load(g + "/max_seqlen.npy")[0]
        fields = ("tokens", "position_ids") if stage == "first" else ("labels", "loss_mask")
        for f in fields:
            want = np.load(f"{flat}/{f}.npy")[:, index]
            if os.path.exists(f"{g}/{f}.npy"):
                same(want, np.load(f"{g}/{f}.npy"), ("probe", f))
            same(load(f)[mb], want, (meta["world_rank"], mb, f))
            checked += 1
        assert not any(os.path.exists(os.path.join(work, "cp2", f"rank{meta['world_rank']}", x + ".npy"))
                       for x in set(("tokens", "labels")) - set(fields))
# PP 4 x CP 2: micro-batch 1 is probe pp4_middle_cp2's source; the middle stages (pp 1, 2)
# hold its flattened cu_seqlens and max_seqlen and no sequence field.
middle = 0
for meta, load in rank_dumps(work + "/pp4"):
    if meta["pp_rank"] in (0, 3):
        continue
    g = "get_batch/pp4_middle_cp2/flattened"
    same(cu_of(load, 1), np.load(g + "/cu_seqlens.npy")[0], (meta["world_rank"], "middle cu"))
    assert load("max_seqlen")[1] == np.load(g + "/max_seqlen.npy")[0], meta["world_rank"]
    d = os.path.join(work, "pp4", f"rank{meta['world_rank']}")
    assert not any(os.path.exists(os.path.join(d, f + ".npy"))
                   for f in ("tokens", "position_ids", "labels", "loss_mask")), d
    middle += 1
assert middle == 4, middle
# CP 1, PP 2: every flattened micro-batch of boundary_L32.
case = "cases/boundary_L32/batches/b0/dp_rank_0"
for meta, load in rank_dumps(work + "/b32"):
    stage = "first" if meta["pp_rank"] == 0 else "last"
    for mb in range(3):
        flat = f"{case}/mb_{mb:02d}/flattened"
        same(cu_of(load, mb), np.load(flat + "/cu_seqlens.npy")[0], (meta["world_rank"], mb))
        assert load("max_seqlen")[mb] == np.load(flat + "/max_seqlen.npy")[0]
        for f in (("tokens", "position_ids") if stage == "first" else ("labels", "loss_mask")):
            same(load(f)[mb], np.load(f"{flat}/{f}.npy"), (meta["world_rank"], mb, f))
            checked += 1
assert checked == 8 * 2 * 2 + 4 * 3 * 2, checked
print("sft run ok:", checked, "rank micro-batch fields equal Megatron's get_batch")
PY
