#!/usr/bin/env bash
# `gridfeed tables` and `gridfeed samples` from the command line (and from YAML) against
# Megatron's golden case folders: every case from its flags, one from a YAML configuration.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_tables.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"   # data paths are relative, as Megatron saw them

# The comparisons, many in one Python start (a start with numpy per comparison was most of this
# test's time): argument groups of four, WHAT GOLDEN OURS LABEL, WHAT "tables" (a case's tables
# and summary) or "samples" (a split's items). Every group is checked; each failure is named by
# its label (case and split) and the file, and any failure fails the whole.
COMPARE=$(cat <<'PY'
import json, os, sys
import numpy as np
def same(a, b):
    x, y = np.load(a), np.load(b)
    assert x.dtype == y.dtype, (a, x.dtype, y.dtype)
    assert x.shape == y.shape, (a, x.shape, y.shape)
    if not np.array_equal(x, y):
        bad = np.argwhere(x != y)[:3].tolist()
        raise AssertionError(f"{a}: values differ from {b}, first at {bad}")
def tables(golden, ours):
    checked = 0
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
            assert summary[split]["length"] == s["len"], (split, summary[split]["length"], s["len"])
    return checked
def samples(golden, ours):
    checked = 0
    for f in sorted(os.listdir(ours)):
        g = os.path.join(golden, f)
        if f == "loss_mask.npy" and os.path.exists(os.path.join(golden, "loss_mask_without_cache_leak.npy")):
            g = os.path.join(golden, "loss_mask_without_cache_leak.npy")
        same(g, os.path.join(ours, f)); checked += 1
    return checked
args = sys.argv[1:]
assert args and len(args) % 4 == 0, args
failed = []
for i in range(0, len(args), 4):
    what, golden, ours, label = args[i:i + 4]
    try:
        checked = {"tables": tables, "samples": samples}[what](golden, ours)
        assert checked >= 3, (ours, checked, "arrays, fewer than 3")
        print(f"{label}: {what} ok: {checked} arrays equal")
    except Exception as e:
        failed.append(label)
        print(f"FAIL: {label}: {what}: {type(e).__name__}: {e}")
if failed:
    print(f"FAIL: {len(failed)} of {len(args) // 4} comparisons: " + "; ".join(failed))
    sys.exit(1)
PY
)
JOBS=()  # the comparisons still to make, four arguments each (above)
compare() { /usr/bin/python3 -c "$COMPARE" "${JOBS[@]}"; JOBS=(); }

run_case() {  # case name, extra flags...: its tables and items; their comparisons to JOBS
  local name=$1; shift
  local case_dir="$GOLDEN/cases/$name"
  "$GRIDFEED" tables "$@" --out "$WORK/$name" 2> "$WORK/err" \
    || { cat "$WORK/err"; echo "FAIL: gridfeed tables, case $name"; exit 1; }
  JOBS+=(tables "$case_dir" "$WORK/$name" "case $name")
  for split in train valid test; do
    [ -f "$case_dir/$split/items/items_index.npy" ] || continue
    local positions="$WORK/each/$name.$split.positions"
    [ -f "$positions" ] || { echo "FAIL: no positions for case $name $split"; exit 1; }
    "$GRIDFEED" samples "$@" --split-name "$split" --positions "$(< "$positions")" \
      --out "$WORK/$name-$split-items" 2> "$WORK/err" \
      || { cat "$WORK/err"; echo "FAIL: gridfeed samples, case $name $split"; exit 1; }
    JOBS+=(samples "$case_dir/$split/items" "$WORK/$name-$split-items" "case $name $split items")
  done
}

# Every golden case, its flags from its case.json and its items' positions from
# items_index.npy, all in one start (tests/cli/golden_flags.py --each), then compared at once.
FLAGS_OF="$(dirname "$(realpath "$0")")/golden_flags.py"
cases=("$GOLDEN"/cases/*/)
[ -d "${cases[0]}" ] || { echo "FAIL: no golden cases under $GOLDEN/cases"; exit 1; }
/usr/bin/python3 "$FLAGS_OF" --each "$WORK/each" "${cases[@]}"
n=0
for case_dir in "${cases[@]}"; do
  name=$(basename "$case_dir")
  mapfile -t flags < "$WORK/each/$name.flags"
  [ "${#flags[@]}" -gt 0 ] || { echo "FAIL: no flags for case $name"; exit 1; }
  echo "case $name"
  run_case "$name" "${flags[@]}"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "FAIL: no golden cases under $GOLDEN/cases"; exit 1; }
compare  # before the YAML run below replaces one case's folder

# The same from a YAML configuration, one flag (--seed) on the command line: the first case
# (by name) with an attention mask, else the first.
yaml_case=$(grep -l '"create_attention_mask": true' "$GOLDEN"/cases/*/case.json | head -n 1 || true)
yaml_case=$(dirname "${yaml_case:-$(ls "$GOLDEN"/cases/*/case.json | head -n 1)}")
/usr/bin/python3 "$FLAGS_OF" "$yaml_case" --yaml > "$WORK/flags.yaml"
seed=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['inputs']['seed'])" \
  "$yaml_case/case.json")
echo "case $(basename "$yaml_case") from YAML"
# Into the first run's folders: refused as they are, replaced whole with --replace.
if "$GRIDFEED" tables --config "$WORK/flags.yaml" --seed "$seed" \
    --out "$WORK/$(basename "$yaml_case")" > /dev/null 2> "$WORK/err"; then
  echo "FAIL: gridfeed tables wrote into a folder holding another run's output"; exit 1
fi
grep -q -- "--replace" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: no --replace hint"; exit 1; }
run_case "$(basename "$yaml_case")" --config "$WORK/flags.yaml" --seed "$seed" --replace
compare

# Bad input fails clearly.
if "$GRIDFEED" tables --data-path corpora/nonexistent --seq-length 8 --out "$WORK/x" 2> "$WORK/err"; then
  echo "FAIL: missing corpus accepted"; exit 1
fi
grep -q "nonexistent.idx" "$WORK/err" || { echo "FAIL: unclear error: $(cat "$WORK/err")"; exit 1; }
# Tables larger than the machine can hold: an error naming the size and what to change, not
# std::bad_alloc or the OOM killer. Sizes no machine holds: 1e12 samples of 1 token from a
# 2,001-document corpus (about 16 TB of tables), a blend of 2e12 positions (24 TB, refused
# before any store is opened). The limit of a job's cgroup: memory_limit_test.sh.
too_big() {  # too_big NAME PATTERN ARGS...
  local name=$1 pattern=$2 rc=0
  shift 2
  "$GRIDFEED" tables --split 100,0,0 --out "$WORK/big" "$@" 2> "$WORK/err" || rc=$?
  [ "$rc" = 1 ] || { cat "$WORK/err"; echo "FAIL: $name: exit $rc, not 1"; exit 1; }
  grep -qE "$pattern" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: $name: no '$pattern'"; exit 1; }
  [ ! -e "$WORK/big" ] || { echo "FAIL: $name: wrote $WORK/big"; exit 1; }
  echo "ok   $name: $(tail -n 1 "$WORK/err")"
}
too_big "tables too large" "tables of [0-9]+ samples .* needs [0-9.]+ GB, more than .*fewer samples" \
  --data-path corpora/corpus_u16 --seq-length 1 --train-samples 1000000000000
too_big "blend too large" "blend table of [0-9]+ positions needs .*--train-samples" \
  --data-path 0.5 corpora/corpus_u16 0.5 corpora/nonexistent --seq-length 16 \
  --train-samples 2000000000000
# GRIDFEED_LOG_LEVEL in any case ("debug" as "DEBUG"); a value it does not know is named in
# a warning, not silently read as INFO.
log_run() {  # log_run LEVEL: a small build's stderr in $WORK/log (DEBUG: a line per file)
  rm -rf "$WORK/log_out"
  GRIDFEED_LOG_LEVEL=$1 "$GRIDFEED" tables --data-path corpora/corpus_u16 --split 100,0,0 \
    --seq-length 16 --train-samples 10 --out "$WORK/log_out" > /dev/null 2> "$WORK/log" ||
    { cat "$WORK/log"; echo "FAIL: GRIDFEED_LOG_LEVEL=$1: tables failed"; exit 1; }
}
log_run debug
grep -q '^\[gridfeed DEBUG\] wrote train/mid_0/document_index.npy' "$WORK/log" ||
  { cat "$WORK/log"; echo "FAIL: GRIDFEED_LOG_LEVEL=debug printed no DEBUG line"; exit 1; }
log_run verbose
grep -q "GRIDFEED_LOG_LEVEL=verbose .*ERROR, WARN, INFO, DEBUG" "$WORK/log" ||
  { cat "$WORK/log"; echo "FAIL: GRIDFEED_LOG_LEVEL=verbose: no warning naming the levels"; exit 1; }
echo "ok   GRIDFEED_LOG_LEVEL: debug and DEBUG alike; an unknown value is named"
echo "cli tables/samples: ok"
