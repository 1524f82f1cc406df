#!/usr/bin/env bash
# Mixture schedules and options as a careless or hostile user writes them (no MPI): unknown
# flags and keys name the nearest valid one; `plan` refuses a budget in iterations without
# --global-batch-size, uses a present store's counts over declared tokens and places a cap where
# the built order does; an alias bomb in `schedule:` is refused at once naming the file; two
# spellings of one store are refused; temperature 0.01 plans and builds; negative --split
# weights, an empty source and `tables` of a schedule say what is wrong.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_mixture_config.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
cd "$GOLDEN"
# KEEP_GOING=1: report every failure, then exit 1 (to see all that an old binary gets wrong).
failures=0
fail() {
  echo "FAIL: $*" >&2
  [ -n "${KEEP_GOING:-}" ] || exit 1
  failures=$((failures + 1))
}
# refused NAME PATTERN CMD...: CMD must fail (in 60 s, under 2 GB) with PATTERN in its output.
# Under AddressSanitizer (scripts/test sets ASAN_OPTIONS) the address-space cap is left out:
# ASan reserves terabytes of shadow address space at start and would abort under it.
LIMIT_KB=2000000
[ -z "${ASAN_OPTIONS:-}" ] || LIMIT_KB=unlimited
refused() {
  local name=$1 pattern=$2
  shift 2
  if (ulimit -v "$LIMIT_KB"; timeout 60 "$@") > "$WORK/$name.out" 2>&1; then
    cat "$WORK/$name.out"
    fail "$name: accepted"
  fi
  grep -qF -- "$pattern" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: no '$pattern'"; }
}
C=corpora
schedule() {  # $1: sources, $2: stages, $3: more top-level keys
  printf 'seq-length: 64\nsplit: "969,30,1"\nsources: {%s}\nschedule:\n%s\n%s\n' "$1" "$2" "${3:-}"
}

# 1. Unknown flags (any subcommand, '_' for '-') and keys name the nearest valid one.
refused flag_underscore "unknown option '--seq_length' (did you mean '--seq-length'?)" \
  "$GRIDFEED" tables --data-path $C/corpus_u16 --seq_length 64 --out "$WORK/t"
refused flag_typo "plan: unknown option '--global-batch-sise' (did you mean '--global-batch-size'?)" \
  "$GRIDFEED" plan --config x.yaml --global-batch-sise 8
printf 'seq_length: 64\ndata-path: [%s/corpus_u16]\n' $C > "$WORK/key.yaml"
refused key_underscore "unknown key 'seq_length' (did you mean 'seq-length'?)" \
  "$GRIDFEED" tables --config "$WORK/key.yaml" --out "$WORK/t"
schedule "u16: $C/corpus_u16" "  - {samples: 8, mixtrue: {u16: 1}}" > "$WORK/stage_key.yaml"
refused stage_key "schedule[0].mixtrue is not a stage key" \
  "$GRIDFEED" plan --config "$WORK/stage_key.yaml"
grep -qF "did you mean 'mixture'?" "$WORK/stage_key.out" || fail "stage key: no hint"
# plan is the mixture's tool: another pipeline's configuration is refused, saying why.
refused plan_not_mixture "plan: the configuration has no mixture schedule" \
  "$GRIDFEED" plan --data-path $C/corpus_u16 --seq-length 64

# 2. A budget in iterations needs the run's global batch size.
schedule "u16: $C/corpus_u16, i32: $C/corpus_i32" \
  "  - {name: main, iterations: 4, mixture: {u16: 1, i32: 1}}" > "$WORK/iters.yaml"
refused iterations "schedule[0] ('main') is sized in iterations: give --global-batch-size" \
  "$GRIDFEED" plan --config "$WORK/iters.yaml"
"$GRIDFEED" plan --config "$WORK/iters.yaml" --global-batch-size 16 --json > "$WORK/iters.json" \
  || fail "plan with --global-batch-size"
# A --split summing to 0 is refused by plan as by run, naming the flag.
refused plan_zero_split "--split '0,0,0' sums to 0" \
  "$GRIDFEED" plan --config "$WORK/iters.yaml" --global-batch-size 16 --split 0,0,0
/usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); assert p["samples"] == 64, p' \
  "$WORK/iters.json" || fail "4 iterations of 16 are not 64 samples"

# 3. An alias bomb in the schedule (10^7 nodes once expanded) is refused at once, naming the file.
{
  printf 'seq-length: 64\nsources: {u16: %s/corpus_u16}\nschedule:\n' $C
  printf '  - &a0 [x, x, x, x, x, x, x, x, x, x]\n'
  for i in 1 2 3 4 5 6 7; do
    p="*a$((i - 1))"
    printf '  - &a%d [%s, %s, %s, %s, %s, %s, %s, %s, %s, %s]\n' $i $p $p $p $p $p $p $p $p $p $p
  done
} > "$WORK/bomb.yaml"
start=$(date +%s)
refused bomb "config '$WORK/bomb.yaml' expands to more than" "$GRIDFEED" plan --config "$WORK/bomb.yaml"
[ $(($(date +%s) - start)) -lt 10 ] || fail "the alias bomb took more than 10 s to refuse"

# 4. One store under two names: refused naming both sources, by file identity.
mkdir -p "$WORK/links"
ln -s "$GOLDEN/$C/corpus_u16.bin" "$WORK/links/u16.bin"
ln -s "$GOLDEN/$C/corpus_u16.idx" "$WORK/links/u16.idx"
for other in "$C//corpus_u16" "$C/../$C/corpus_u16" "$WORK/links/u16"; do
  schedule "a: $C/corpus_u16, b: '$other'" "  - {samples: 8, mixture: {a: 1, b: 1}}" > "$WORK/same.yaml"
  refused same_plan "sources.b.path '$other' is the token store of source 'a'" \
    "$GRIDFEED" plan --config "$WORK/same.yaml"
  refused same_samples "is the token store of source 'a'" \
    "$GRIDFEED" samples --config "$WORK/same.yaml" --positions 0:2 --out "$WORK/s"
done

# 5. plan reads a present store's train part (not the declared tokens, which it says it ignored),
# and its cap binds where the built order's does (the build logs the position).
schedule "u16: {path: $C/corpus_u16, tokens: 1e12}, multi: $C/corpus_multi" \
  "  - {name: main, samples: 6000, mixture: {u16: 0.5, multi: 0.5}}" "max_epochs: {multi: 1.5}" \
  > "$WORK/cap.yaml"
"$GRIDFEED" plan --config "$WORK/cap.yaml" --json > "$WORK/cap.json" || fail "plan (cap)"
"$GRIDFEED" plan --config "$WORK/cap.yaml" > "$WORK/cap.txt" || fail "plan (cap, text)"
grep -q "u16 .*(its store's train part; the declared 1e+03B not used)" "$WORK/cap.txt" \
  || { cat "$WORK/cap.txt"; fail "plan does not say which size it used"; }
GRIDFEED_LOG_LEVEL=info "$GRIDFEED" samples --config "$WORK/cap.yaml" --positions 0:2 \
  --out "$WORK/cap_samples" > "$WORK/cap_build.out" 2>&1 || { cat "$WORK/cap_build.out"; fail "build"; }
/usr/bin/python3 - "$WORK/cap.json" "$WORK/cap_build.out" "$C" <<'PY' || fail "plan vs build"
import json, re, struct, sys
import numpy as np
plan = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
def train_tokens(prefix):  # the train part (--split 969,30,1) of a store, from its .idx
    with open(prefix + ".idx", "rb") as f:
        n = struct.unpack("<Q", f.read(34)[18:26])[0]
        lengths = np.frombuffer(f.read(4 * n), dtype="<i4")
    return int(lengths[:int(round(0.969 * n))].sum())
u16, multi = plan["sources"]
assert u16["size_from"] == "store" and u16["declared_tokens"] == 1e12, u16
assert u16["tokens"] == train_tokens(sys.argv[3] + "/corpus_u16"), u16
m = re.search(r"source 'multi' reached max_epochs 1.5 \((\d+) samples\) at position (\d+)", log)
assert m, log
# The run's cap: floor(1.5 x floor((tokens - 1) / 64)) samples.
assert int(m.group(1)) == int(1.5 * ((train_tokens(sys.argv[3] + "/corpus_multi") - 1) // 64)), m.group(1)
assert len(plan["caps"]) == 1 and plan["caps"][0]["source"] == "multi", plan["caps"]
cap = plan["caps"][0]
assert abs(cap["position"] - int(m.group(2))) <= 2, (cap, m.group(2))
print(f"plan: store size {u16['tokens']:.0f}, cap at {cap['position']} (built order: {m.group(2)})")
PY

# 6. Temperature 0.01 (size^100 overflows) plans and builds.
schedule "u16: $C/corpus_u16, i32: $C/corpus_i32" "  - {samples: 64, temperature: 0.01}" \
  > "$WORK/cold.yaml"
"$GRIDFEED" plan --config "$WORK/cold.yaml" --json > "$WORK/cold.json" 2>&1 \
  || { cat "$WORK/cold.json"; fail "plan at temperature 0.01"; }
"$GRIDFEED" samples --config "$WORK/cold.yaml" --positions 0:4 --out "$WORK/cold" \
  > "$WORK/cold.out" 2>&1 || { cat "$WORK/cold.out"; fail "samples at temperature 0.01"; }

# 7. Errors that say what is wrong.
refused split_negative "--split '1,-2,3': '-2' is negative" \
  "$GRIDFEED" tables --data-path $C/corpus_u16 --seq-length 64 --split 1,-2,3 --out "$WORK/t"
refused tables_mixture "tables: the configuration is a mixture schedule" \
  "$GRIDFEED" tables --config "$WORK/cold.yaml" --out "$WORK/t"
/usr/bin/python3 - "$WORK/empty" <<'PY'
import struct, sys
# A valid store with no sequences: header, counts 0 and 1, document index [0].
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 0, 1) + struct.pack("<q", 0))
open(sys.argv[1] + ".bin", "wb").close()
PY
schedule "u16: $C/corpus_u16, empty: $WORK/empty" "  - {samples: 8, mixture: {u16: 1, empty: 0}}" \
  > "$WORK/empty.yaml"
refused empty_source "mixture source 'empty' ('$WORK/empty') has no tokens in its train part" \
  "$GRIDFEED" samples --config "$WORK/empty.yaml" --positions 0:2 --out "$WORK/e"
grep -q "loop forever" "$WORK/empty_source.out" && fail "empty source: Megatron's message"
refused range_upper "--data-parallel-size must be >= 0 and at most 2^24, got 99999999" \
  "$GRIDFEED" plan --config "$WORK/cold.yaml" --data-parallel-size 99999999
[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "cli mixture config: ok"
