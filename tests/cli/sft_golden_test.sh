#!/usr/bin/env bash
# `gridfeed samples --sft` and `gridfeed tables --sft` against every case and split of an SFT
# golden set (Megatron's SFTDataset / BlendedDataset outputs): every items/ array in name,
# dtype, shape and value, blend tables where a split has them, and each split's length.
# Usage: sft_golden_test.sh GRIDFEED GOLDEN_DIR  (a hidden set in the same layout works too)
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
FLAGS=$(realpath "$(dirname "$0")/sft_golden_flags.py")
WORK=$(mktemp -d /tmp/gridfeed_sft.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"   # data and tokenizer paths are relative, as Megatron saw them

# The comparisons, all in one Python start (a start with numpy per comparison was most of this
# test's time): argument groups of four, WHAT GOLDEN OURS LABEL, WHAT "tables" (a case's
# summary and blend tables) or "items" (a split's items). Every group is checked; each failure
# is named by its label (case and split) and the file, and any failure fails the whole.
COMPARE=$(cat <<'PY'
import json, os, sys
import numpy as np
def same(a, b):
    x, y = np.load(a), np.load(b)
    assert x.dtype == y.dtype, (a, x.dtype, y.dtype)
    assert x.shape == y.shape, (a, x.shape, y.shape)
    if not np.array_equal(x, y):
        bad = np.argwhere(x != y)[:3].tolist()
        raise AssertionError(f"{a}: values differ, first at {bad}")
def items(golden, ours):
    checked = 0
    want = sorted(f for f in os.listdir(golden) if f.endswith(".npy"))
    have = sorted(f for f in os.listdir(ours) if f.endswith(".npy"))
    assert want == have, ("files differ", want, have)
    for f in want:
        same(os.path.join(golden, f), os.path.join(ours, f)); checked += 1
    assert checked >= 7, checked
    return checked
def tables(golden, ours):
    checked = 0
    case = json.load(open(os.path.join(golden, "case.json")))
    summary = json.load(open(os.path.join(ours, "summary.json")))
    for split, s in case["splits"].items():
        assert (s is None) == (summary[split] is None), split
        if s is None:
            continue
        assert summary[split]["length"] == s["len"], (split, summary[split]["length"], s["len"])
        assert summary[split]["type"] == s["type"], (split, summary[split]["type"], s["type"])
        for m, n in zip(s.get("mid", []), summary[split]["mid"]):
            assert m["row_index_range"] == n["row_index_range"], (split, m, n)
            assert m["num_samples"] == n["num_samples"], (split, m, n)
        checked += 1
        blend = os.path.join(golden, split, "blend")
        if os.path.isdir(blend):
            for f in sorted(os.listdir(blend)):
                same(os.path.join(blend, f), os.path.join(ours, split, "blend", f)); checked += 1
    assert checked >= 1
    return checked
args = sys.argv[1:]
assert args and len(args) % 4 == 0, args
failed = []
for i in range(0, len(args), 4):
    what, golden, ours, label = args[i:i + 4]
    try:
        checked = {"tables": tables, "items": items}[what](golden, ours)
        print(f"{label}: {what} ok: {checked} checks")
    except Exception as e:
        failed.append(label)
        print(f"FAIL: {label}: {what}: {type(e).__name__}: {e}")
if failed:
    print(f"FAIL: {len(failed)} of {len(args) // 4} comparisons: " + "; ".join(failed))
    sys.exit(1)
PY
)

# Every case's flags and its splits' positions (items/items_index.npy) in one Python start
# (sft_golden_flags.py --each); gridfeed for every case and split; then the comparisons.
case_dirs=("$GOLDEN"/cases/*/)
/usr/bin/python3 "$FLAGS" --each "$WORK/each" "${case_dirs[@]}"
JOBS=()  # four arguments per comparison (above)
cases=0
for case_dir in "${case_dirs[@]}"; do
  case_dir=${case_dir%/}
  name=$(basename "$case_dir")
  mapfile -t flags < "$WORK/each/$name.flags"
  "$GRIDFEED" tables "${flags[@]}" --out "$WORK/$name/tables" > /dev/null 2> "$WORK/err" \
    || { cat "$WORK/err"; echo "FAIL: gridfeed tables --sft, case $name"; exit 1; }
  JOBS+=(tables "$case_dir" "$WORK/$name/tables" "case $name")
  for split in train valid test; do
    items="$case_dir/$split/items"
    [ -f "$items/items_index.npy" ] || continue
    pos=$(< "$WORK/each/$name.$split.positions")
    "$GRIDFEED" samples "${flags[@]}" --split-name "$split" --positions "$pos" \
      --out "$WORK/$name/$split" > /dev/null 2> "$WORK/err" \
      || { cat "$WORK/err"; echo "FAIL: gridfeed samples --sft, case $name split $split"; exit 1; }
    JOBS+=(items "$items" "$WORK/$name/$split" "case $name split $split")
    cases=$((cases + 1))
  done
done
[ "$cases" -ge 1 ] || { echo "FAIL: no case with items under $GOLDEN/cases"; exit 1; }
/usr/bin/python3 -c "$COMPARE" "${JOBS[@]}"

# Wrong inputs: an error naming what to change, never a crash or an empty result. These use
# the visible set's corpora and tokenizer; a set without them (hf-tokenizers) skips this part.
if [ ! -f corpora/sft_a.jsonl ] || [ ! -d tokenizers/chat ]; then
  echo "sft golden: $cases case splits equal"
  exit 0
fi
expect_error() {  # message fragment, flags...
  local want=$1; shift
  if "$GRIDFEED" "$@" > "$WORK/err" 2>&1; then echo "FAIL: accepted: $*"; exit 1; fi
  grep -qF -- "$want" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: no '$want' for: $*"; exit 1; }
}
base=(--sft --split 100,0,0 --train-samples 4 --valid-samples 0 --test-samples 0 --seq-length 64)
expect_error "--tokenizer-model" samples "${base[@]}" --data-path corpora/sft_a.jsonl \
  --positions 0 --out "$WORK/e"
expect_error "--tokenizer-model" samples "${base[@]}" --data-path corpora/sft_a.jsonl \
  --tokenizer-model "$WORK/none" --positions 0 --out "$WORK/e"
expect_error "corpora/missing.jsonl" samples "${base[@]}" --data-path corpora/missing.jsonl \
  --tokenizer-model tokenizers/chat --positions 0 --out "$WORK/e"
expect_error "needs weights" samples "${base[@]}" --data-path corpora/sft_a.jsonl \
  corpora/sft_b.jsonl corpora/sft_a.jsonl --tokenizer-model tokenizers/chat --positions 0 \
  --out "$WORK/e"
expect_error "--valid-samples" samples --sft --split 90,10,0 --train-samples 4 \
  --valid-samples none --seq-length 64 --data-path corpora/sft_a.jsonl \
  --tokenizer-model tokenizers/chat --positions 0 --out "$WORK/e"
expect_error "beyond the split" samples "${base[@]}" --data-path corpora/sft_a.jsonl \
  --tokenizer-model tokenizers/chat --positions 4 --out "$WORK/e"
expect_error "--reset-position-ids" samples "${base[@]}" --data-path corpora/sft_a.jsonl \
  --tokenizer-model tokenizers/chat --reset-position-ids --positions 0 --out "$WORK/e"
expect_error "--sft has no assembly floor" bench "${base[@]}" --data-path corpora/sft_a.jsonl \
  --tokenizer-model tokenizers/chat
# A role holding a NUL byte is named whole (the message was cut at the NUL).
printf '%s\n' '{"messages":[{"role":"system","content":"s"},{"role":"us\u0000er","content":"hi"}]}' \
  > "$WORK/nul_role.jsonl"
expect_error 'role "us\u0000er" is not system' samples "${base[@]}" \
  --sft-tokenizer-prompt-format nemotron-h-aligned --data-path "$WORK/nul_role.jsonl" \
  --tokenizer-model tokenizers/chat --positions 0 --out "$WORK/e"
echo "sft errors: 9 wrong inputs refused with the flag or file named"
echo "sft golden: $cases case splits equal"
