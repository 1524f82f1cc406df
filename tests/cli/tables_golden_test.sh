#!/usr/bin/env bash
# `gridfeed tables` and `gridfeed samples` from the command line (and from YAML) against
# Megatron's golden case folders: every case from its flags, one from a YAML configuration.
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
  "$GRIDFEED" tables "$@" --out "$WORK/$name" 2> "$WORK/err" \
    || { cat "$WORK/err"; echo "FAIL: gridfeed tables, case $name"; exit 1; }
  /usr/bin/python3 -c "$COMPARE" "$case_dir" "$WORK/$name" tables
  for split in train valid test; do
    [ -f "$case_dir/$split/items/items_index.npy" ] || continue
    local pos
    pos=$(/usr/bin/python3 -c "import numpy as np,sys; print(','.join(map(str, np.load(sys.argv[1]))))" \
      "$case_dir/$split/items/items_index.npy")
    "$GRIDFEED" samples "$@" --split-name "$split" --positions "$pos" \
      --out "$WORK/$name-$split-items" 2> "$WORK/err" \
      || { cat "$WORK/err"; echo "FAIL: gridfeed samples, case $name $split"; exit 1; }
    /usr/bin/python3 -c "$COMPARE" "$case_dir/$split/items" "$WORK/$name-$split-items" samples
  done
}

# Every golden case, its flags from its case.json (tests/cli/golden_flags.py).
FLAGS_OF="$(dirname "$(realpath "$0")")/golden_flags.py"
n=0
for case_dir in "$GOLDEN"/cases/*/; do
  name=$(basename "$case_dir")
  mapfile -t flags < <(/usr/bin/python3 "$FLAGS_OF" "$case_dir")
  [ "${#flags[@]}" -gt 0 ] || { echo "FAIL: no flags for case $name"; exit 1; }
  echo "case $name"
  run_case "$name" "${flags[@]}"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "FAIL: no golden cases under $GOLDEN/cases"; exit 1; }

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
