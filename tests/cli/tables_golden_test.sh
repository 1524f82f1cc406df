#!/usr/bin/env bash
# `gridfeed tables` and `gridfeed samples` from the command line (and from YAML) against
# Megatron's golden case folders: one weighted blend, one per-split blend, one with all flags.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_tables.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"   # data paths are relative, as Megatron saw them

COMPARE=$(cat <<'PY'
import json, os, sys
import numpy as np
golden, ours, what = sys.argv[1], sys.argv[2], sys.argv[3]
checked = 0
def same(a, b):
    x, y = np.load(a), np.load(b)
    assert x.dtype == y.dtype, (a, x.dtype, y.dtype)
    assert x.shape == y.shape, (a, x.shape, y.shape)
    assert np.array_equal(x, y), a
if what == "tables":
    for split in ("train", "valid", "test"):
        g = os.path.join(golden, split)
        assert os.path.isdir(g) == os.path.isdir(os.path.join(ours, split)), split
        if not os.path.isdir(g):
            continue
        for sub in sorted(os.listdir(g)):
            if sub == "items":
                continue
            for f in sorted(os.listdir(os.path.join(g, sub))):
                if f.endswith(".npy"):
                    same(os.path.join(g, sub, f), os.path.join(ours, split, sub, f)); checked += 1
    summary = json.load(open(os.path.join(ours, "summary.json")))
    case = json.load(open(os.path.join(golden, "case.json")))
    for split, s in case["splits"].items():
        assert (s is None) == (summary[split] is None), split
        if s is not None:
            assert summary[split]["length"] == s["len"], split
else:
    for f in sorted(os.listdir(ours)):
        g = os.path.join(golden, f)
        if f == "loss_mask.npy" and os.path.exists(os.path.join(golden, "loss_mask_without_cache_leak.npy")):
            g = os.path.join(golden, "loss_mask_without_cache_leak.npy")
        same(g, os.path.join(ours, f)); checked += 1
assert checked >= 3, checked
print(what, "ok:", checked, "arrays equal")
PY
)

run_case() {  # case name, extra flags...
  local name=$1; shift
  local case_dir="$GOLDEN/cases/$name"
  "$GRIDFEED" tables "$@" --out "$WORK/$name" 2>/dev/null
  /usr/bin/python3 -c "$COMPARE" "$case_dir" "$WORK/$name" tables
  for split in train valid test; do
    [ -f "$case_dir/$split/items/items_index.npy" ] || continue
    local pos
    pos=$(/usr/bin/python3 -c "import numpy as np,sys; print(','.join(map(str, np.load(sys.argv[1]))))" \
      "$case_dir/$split/items/items_index.npy")
    "$GRIDFEED" samples "$@" --split-name "$split" --positions "$pos" \
      --out "$WORK/$name-$split-items" 2>/dev/null
    /usr/bin/python3 -c "$COMPARE" "$case_dir/$split/items" "$WORK/$name-$split-items" samples
  done
}

run_case blend2_w_u16_i32_L128 --data-path 0.3 corpora/corpus_u16 0.7 corpora/corpus_i32 \
  --split 969,30,1 --seq-length 128 --seed 1234 --train-samples 2000 --valid-samples 100 \
  --test-samples 20 --vocab-size 128256 --eod-id 0
run_case blend_per_split_L128 --train-data-path 0.6 corpora/corpus_u16 0.4 corpora/corpus_i32 \
  --valid-data-path corpora/corpus_multi corpora/corpus_tiny --seq-length 128 --seed 99 \
  --train-samples 1500 --valid-samples none --test-samples 10 --vocab-size 50000 --eod-id 0
cat > "$WORK/flags.yaml" <<'YAML'
data-path: [corpora/corpus_i32]
split: "969,30,1"
seq-length: 32
seed: 1          # overridden on the command line below
train-samples: 300
valid-samples: 20
test-samples: 4
vocab-size: 128256
eod-id: 0
reset-position-ids: true
reset-attention-mask: true
eod-mask-loss: true
create-attention-mask: true
YAML
run_case i32_flags_all_attnmask_L32 --config "$WORK/flags.yaml" --seed 4242

# Bad input fails clearly.
if "$GRIDFEED" tables --data-path corpora/nonexistent --seq-length 8 --out "$WORK/x" 2> "$WORK/err"; then
  echo "FAIL: missing corpus accepted"; exit 1
fi
grep -q "nonexistent.idx" "$WORK/err" || { echo "FAIL: unclear error: $(cat "$WORK/err")"; exit 1; }
echo "cli tables/samples: ok"
