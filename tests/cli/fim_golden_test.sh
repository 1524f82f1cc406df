#!/usr/bin/env bash
# `gridfeed samples --fim-data` against every case and split of a FIM golden set (Megatron's
# GPTFIMDataset items, fetched in fetch_order from one fresh dataset): every items/ array in
# name, dtype, shape and value (loss_mask_without_cache_leak in place of loss_mask where Megatron's
# mask cache leaked; rng_trace.jsonl is checked by fim_golden_test), then wrong inputs refused.
# Usage: fim_golden_test.sh GRIDFEED GOLDEN_DIR  (a hidden set in the same layout works too)
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/fim_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_fim.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"   # data and tokenizer paths are relative, as Megatron saw them

# The comparisons, all in one Python start (a start with numpy per comparison was most of this
# test's time): argument groups of three, GOLDEN_ITEMS OUR_ITEMS LABEL. Every group is checked;
# each failure is named by its label (case and split) and the file, and any fails the whole.
COMPARE=$(cat <<'PY'
import os, sys
import numpy as np
def same(a, b):
    x, y = np.load(a), np.load(b)
    assert x.dtype == y.dtype, (a, x.dtype, y.dtype)
    assert x.shape == y.shape, (a, x.shape, y.shape)
    if not np.array_equal(x, y):
        bad = np.argwhere(x != y)[:3].tolist()
        raise AssertionError(f"{a}: values differ, first at {bad}")
def items(golden, ours):
    files = sorted(f for f in os.listdir(golden) if f.endswith(".npy"))
    have = sorted(f for f in os.listdir(ours) if f.endswith(".npy"))
    pairs = []  # (golden file, our file)
    for f in files:
        if f in ("loss_mask.npy", "loss_mask_without_cache_leak.npy", "fetch_order.npy"):
            continue
        if f == "window_before_fim.npy" and f not in have:
            continue  # a debug aid, not part of the contract
        pairs.append((f, f))
    leak = "loss_mask_without_cache_leak.npy"
    pairs.append((leak if leak in files else "loss_mask.npy", "loss_mask.npy"))
    pairs.append(("fetch_order.npy", "items_index.npy"))
    extra = set(have) - {o for _, o in pairs} - {"window_before_fim.npy"}
    assert not extra, ("files Megatron does not write", sorted(extra))
    for g, o in pairs:
        assert o in have, ("missing", o)
        same(os.path.join(golden, g), os.path.join(ours, o))
    return len(pairs)
args = sys.argv[1:]
assert args and len(args) % 3 == 0, args
failed = []
for i in range(0, len(args), 3):
    golden, ours, label = args[i:i + 3]
    try:
        print(f"{label}: items ok: {items(golden, ours)} arrays")
    except Exception as e:
        failed.append(label)
        print(f"FAIL: {label}: {type(e).__name__}: {e}")
if failed:
    print(f"FAIL: {len(failed)} of {len(args) // 3} comparisons: " + "; ".join(failed))
    sys.exit(1)
PY
)

# Every case's flags and its splits' positions (items/fetch_order.npy) in one Python start
# (fim_golden_flags.py --each); gridfeed for every case and split; then the comparisons.
case_dirs=("$GOLDEN"/cases/*/)
/usr/bin/python3 "$FLAGS" --each "$WORK/each" "${case_dirs[@]}"
JOBS=()  # three arguments per comparison (above)
cases=0
for case_dir in "${case_dirs[@]}"; do
  case_dir=${case_dir%/}
  name=$(basename "$case_dir")
  mapfile -t flags < "$WORK/each/$name.flags"
  for split in train valid test; do
    items="$case_dir/$split/items"
    [ -f "$items/fetch_order.npy" ] || continue
    pos=$(< "$WORK/each/$name.$split.positions")
    "$GRIDFEED" samples "${flags[@]}" --split-name "$split" --positions "$pos" \
      --out "$WORK/$name/$split" > /dev/null 2> "$WORK/err" \
      || { cat "$WORK/err"; echo "FAIL: gridfeed samples --fim-data, case $name split $split"; exit 1; }
    JOBS+=("$items" "$WORK/$name/$split" "case $name split $split")
    cases=$((cases + 1))
  done
done
[ "$cases" -ge 1 ] || { echo "FAIL: no case with items under $GOLDEN/cases"; exit 1; }
/usr/bin/python3 -c "$COMPARE" "${JOBS[@]}"

# Wrong inputs: an error naming what to change, never a crash or an empty result. These use
# the visible set's corpus and tokenizer; a set without them skips this part.
if [ -f corpora/fim_u16.idx ] && [ -d tokenizers/u16_pairs ]; then
  expect_error() {  # message fragment, flags...
    local want=$1; shift
    if "$GRIDFEED" "$@" > "$WORK/err" 2>&1; then echo "FAIL: accepted: $*"; exit 1; fi
    grep -qF -- "$want" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: no '$want' for: $*"; exit 1; }
  }
  base=(samples --fim-data --data-path corpora/fim_u16 --split 100,0,0 --train-samples 8
        --valid-samples 0 --test-samples 0 --seq-length 64 --out "$WORK/e")
  tok=(--tokenizer-model tokenizers/u16_pairs --special-tokens "<fim_prefix>" "<fim_middle>"
       "<fim_suffix>" "<fim_pad>" "<file_sep>")
  expect_error "--tokenizer-model" "${base[@]}" --positions 0
  expect_error "--fim-rate" "${base[@]}" "${tok[@]}" --fim-rate 0 --positions 0
  expect_error "--fim-spm-rate" "${base[@]}" "${tok[@]}" --fim-spm-rate 0 --positions 0
  # NaN is named as such (it was "got null").
  expect_error "--fim-rate must be nonzero and a probability in (0, 1], got nan" "${base[@]}" \
    "${tok[@]}" --fim-rate nan --positions 0
  expect_error "--fim-fragment-rate must be a probability in [0, 1] (or -1: none), got -inf" \
    "${base[@]}" "${tok[@]}" --fim-fragment-rate -inf --positions 0
  expect_error "--fim-fragment-rate" "${base[@]}" "${tok[@]}" --fim-split-sample "Ā" --positions 0
  expect_error "--fim-prefix-token" "${base[@]}" "${tok[@]}" --fim-prefix-token "<nope>" --positions 0
  expect_error "--fim-eod-token" "${base[@]}" "${tok[@]}" --fim-eod-token "<nope>" --positions 0
  expect_error "--sft" "${base[@]}" "${tok[@]}" --sft --positions 0
  expect_error "beyond the split" "${base[@]}" "${tok[@]}" --positions 100000
  # A token id the tokenizer lacks names the store, the sample and the window's tokens it was
  # decoding (it named neither store nor sample).
  mkdir -p "$WORK/big"
  cp corpora/fim_u16.idx "$WORK/big/x.idx"
  /usr/bin/python3 -c "import sys; n = len(open(sys.argv[1], 'rb').read()); \
open(sys.argv[2], 'wb').write(b'\xff\xfe' * (n // 2))" corpora/fim_u16.bin "$WORK/big/x.bin"
  big=(--fim-data --data-path "$WORK/big/x" --split 100,0,0 --train-samples 8 --valid-samples 0
       --test-samples 0 --seq-length 64 --fim-rate 1 "${tok[@]}")
  want="of the store '$WORK/big/x'): decoding the window's tokens [0, 65): token id 65279 at"
  expect_error "FIM sample at train position 3 (sample " samples "${big[@]}" --positions 3 \
    --out "$WORK/e"
  grep -qF -- "$want" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: samples: no '$want'"; exit 1; }
  expect_error "FIM sample at train position 0 (sample " run "${big[@]}" --train-iters 1
  grep -qF -- "$want" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: run: no '$want'"; exit 1; }
  # What run does not feed yet is refused rather than fed as other data.
  run=(run --fim-data --data-path corpora/fim_u16 --split 100,0,0 --train-samples 8
       --valid-samples 0 --test-samples 0 --seq-length 64 "${tok[@]}" --train-iters 1)
  expect_error "--dataloader-inter-document-masking" "${run[@]}" \
    --dataloader-inter-document-masking
  expect_error "--num-workers" "${run[@]}" --num-workers -1
  expect_error "--dataloader-type cyclic" "${run[@]}" --dataloader-type cyclic
  expect_error "bench: --fim-data" bench --fim-data --data-path corpora/fim_u16 --split 100,0,0 \
    --train-samples 8 --valid-samples 0 --test-samples 0 --seq-length 64 "${tok[@]}"
  echo "fim errors: 16 wrong inputs refused with the flag named"
fi
echo "fim golden: $cases case splits equal"
