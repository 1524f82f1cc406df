#!/usr/bin/env bash
# Megatron's many-file data flags (config/data_args.h) on the golden corpora:
# --data-args-path and --per-split-data-args-path give byte-identical `tables` outputs to the
# inline lists; `inspect --per-dataset-sequences-out` writes Megatron's sequences file (the
# .idx header counts, Megatron's json.dump text), which `tables` accepts and whose forged or
# missing entries it refuses; and every malformed file is refused naming the flag and the file.
# Usage: data_args_test.sh GRIDFEED GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_data_args.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"   # data paths are relative, as Megatron saw them

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_error NAME PATTERN ARGS...: gridfeed ARGS fails and its stderr matches PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  if "$GRIDFEED" "$@" > "$WORK/out.txt" 2> "$WORK/err.txt"; then
    fail "$name: succeeded"
  fi
  grep -qE -- "$pattern" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$name: no '$pattern'"; }
  echo "ok   $name: $(tail -n 1 "$WORK/err.txt")"
}
same_tables() {  # same_tables NAME DIR_A DIR_B: identical file lists and bytes
  [ -s "$2/summary.json" ] || fail "$1: no $2/summary.json"
  diff -r "$2" "$3" > /dev/null || fail "$1: $2 and $3 differ"
  echo "ok   $1: $(find "$2" -type f | wc -l) files identical"
}

# 1. --data-args-path: the --data-path list of a weighted blend in a file.
common=(--split 99,1,0 --train-samples 3000 --valid-samples 200 --test-samples 0
        --seq-length 128 --seed 555 --vocab-size 128256 --eod-id 0)
blend=(20 corpora/corpus_u16 30 corpora/corpus_i32 50 corpora/corpus_multi)
"$GRIDFEED" tables "${common[@]}" --data-path "${blend[@]}" --out "$WORK/inline" 2> /dev/null
printf '20\tcorpora/corpus_u16\n\n  30 corpora/corpus_i32\r\n50\n corpora/corpus_multi   ' \
  > "$WORK/blend.txt"
"$GRIDFEED" tables "${common[@]}" --data-args-path "$WORK/blend.txt" --out "$WORK/file" \
  2> /dev/null
same_tables "--data-args-path = --data-path" "$WORK/inline" "$WORK/file"
# The same from a YAML configuration's key.
printf 'data-args-path: %s\n' "$WORK/blend.txt" > "$WORK/config.yaml"
"$GRIDFEED" tables --config "$WORK/config.yaml" "${common[@]}" --out "$WORK/yaml" 2> /dev/null
same_tables "YAML data-args-path = --data-path" "$WORK/inline" "$WORK/yaml"
# The comparison sees a different list (the check can fail).
printf '20 corpora/corpus_u16 30 corpora/corpus_i32 51 corpora/corpus_multi\n' > "$WORK/other.txt"
"$GRIDFEED" tables "${common[@]}" --data-args-path "$WORK/other.txt" --out "$WORK/other" \
  2> /dev/null
if diff -r "$WORK/inline" "$WORK/other" > /dev/null; then fail "other weights: same tables"; fi
echo "ok   other weights give other tables"

# 2. --per-split-data-args-path: the per-split lists of golden case blend_per_split_L128.
split_common=(--train-samples 1500 --valid-samples none --test-samples 10 --seq-length 128
              --seed 99 --vocab-size 128256 --eod-id 0)
"$GRIDFEED" tables "${split_common[@]}" \
  --train-data-path 0.6 corpora/corpus_u16 0.4 corpora/corpus_i32 \
  --valid-data-path corpora/corpus_multi corpora/corpus_tiny --out "$WORK/split_inline" 2> /dev/null
cat > "$WORK/splits.json" <<'JSON'
{"train": ["0.6", "corpora/corpus_u16", "0.4", "corpora/corpus_i32"],
 "valid": ["corpora/corpus_multi", "corpora/corpus_tiny"], "test": null}
JSON
# Megatron also takes a list as one string, and weights as JSON numbers.
cat > "$WORK/splits2.json" <<'JSON'
{"train": [0.6, "corpora/corpus_u16", 0.4, "corpora/corpus_i32"],
 "valid": "corpora/corpus_multi  corpora/corpus_tiny", "test": null}
JSON
for f in splits splits2; do
  "$GRIDFEED" tables "${split_common[@]}" --per-split-data-args-path "$WORK/$f.json" \
    --out "$WORK/split_$f" 2> /dev/null
  same_tables "--per-split-data-args-path $f.json = --train/valid-data-path" \
    "$WORK/split_inline" "$WORK/split_$f"
done

# 3. inspect writes the sequences file; tables accepts it, and refuses forged or missing counts.
"$GRIDFEED" inspect --per-dataset-sequences-out "$WORK/seq.json" --data-path "${blend[@]}" \
  > /dev/null
/usr/bin/python3 - "$WORK/seq.json" <<'PY'
import json, struct, sys
text = open(sys.argv[1]).read()
want = {}
for p in ("corpora/corpus_u16", "corpora/corpus_i32", "corpora/corpus_multi"):
    with open(p + ".idx", "rb") as f:
        head = f.read(34)
    sequences, documents = struct.unpack("<QQ", head[18:34])
    want[p] = (sequences, documents)
# Megatron's tools/build_sequences_per_dataset.py: json.dump of {prefix: (sequences, documents)}.
assert text == json.dumps(want), (text, json.dumps(want))
print("ok   inspect wrote", text)
PY
"$GRIDFEED" tables "${common[@]}" --data-path "${blend[@]}" \
  --per-dataset-sequences-path "$WORK/seq.json" --out "$WORK/seq_tables" 2> /dev/null
same_tables "tables with --per-dataset-sequences-path" "$WORK/inline" "$WORK/seq_tables"
# From the per-split file and the blend file, in Megatron's order (blend, then train/valid/test).
"$GRIDFEED" inspect --per-dataset-sequences-out "$WORK/seq_split.json" \
  --per-split-data-args-path "$WORK/splits.json" > /dev/null
grep -qF '{"corpora/corpus_u16": [2001, 2002], "corpora/corpus_i32": [600, 601], "corpora/corpus_multi": [932, 301], "corpora/corpus_tiny": [12, 13]}' \
  "$WORK/seq_split.json" || fail "inspect per-split: $(cat "$WORK/seq_split.json")"
"$GRIDFEED" inspect --per-dataset-sequences-out "$WORK/seq_file.json" \
  --data-args-path "$WORK/blend.txt" > /dev/null
cmp -s "$WORK/seq.json" "$WORK/seq_file.json" || fail "inspect --data-args-path differs"
"$GRIDFEED" tables "${split_common[@]}" --per-split-data-args-path "$WORK/splits.json" \
  --per-dataset-sequences-path "$WORK/seq_split.json" --out "$WORK/seq_split_tables" 2> /dev/null
same_tables "per-split tables with the sequences file" "$WORK/split_inline" \
  "$WORK/seq_split_tables"
echo "ok   inspect from --per-split-data-args-path and --data-args-path"

sed 's/\[600, 601\]/[599, 601]/' "$WORK/seq.json" > "$WORK/forged.json"
grep -qF '[599, 601]' "$WORK/forged.json" || fail "forging the count"
expect_error "forged sequence count" \
  "per-dataset-sequences-path '$WORK/forged.json'.*'corpora/corpus_i32'.*\[599, 601\].*holds \[600, 601\]" \
  tables "${common[@]}" --data-path "${blend[@]}" --per-dataset-sequences-path "$WORK/forged.json" \
  --out "$WORK/x"
sed 's/\[932, 301\]/[932, 300]/' "$WORK/seq.json" > "$WORK/forged_docs.json"
expect_error "forged document count" "'corpora/corpus_multi'.*\[932, 300\].*holds \[932, 301\]" \
  tables "${common[@]}" --data-path "${blend[@]}" \
  --per-dataset-sequences-path "$WORK/forged_docs.json" --out "$WORK/x"
printf '{"corpora/corpus_u16": [2001, 2002], "corpora/corpus_multi": [932, 301]}' \
  > "$WORK/missing.json"
expect_error "prefix missing from the sequences file" \
  "'$WORK/missing.json' has no entry for dataset 'corpora/corpus_i32'" \
  tables "${common[@]}" --data-path "${blend[@]}" --per-dataset-sequences-path "$WORK/missing.json" \
  --out "$WORK/x"
[ ! -e "$WORK/x" ] || fail "a refused build wrote $WORK/x"

# 4. Malformed files and exclusions: InvalidArgument (NotFound, IoError) naming flag and file.
dargs() { expect_error "$1" "$2" tables "${common[@]}" --data-args-path "$3" --out "$WORK/x"; }
dargs "missing --data-args-path file" "cannot open --data-args-path '$WORK/none.txt'" \
  "$WORK/none.txt"
dargs "a directory" "--data-args-path '$WORK'.*not a regular file" "$WORK"
: > "$WORK/empty.txt"
dargs "empty list" "--data-args-path '$WORK/empty.txt' holds no prefix" "$WORK/empty.txt"
printf '20 corpora/corpus_u16\n30\n' > "$WORK/odd.txt"
dargs "odd count of weight/prefix" "--data-args-path '$WORK/odd.txt' holds 3 entries, an odd count" \
  "$WORK/odd.txt"
printf '20 corpora/corpus_u16\nthirty corpora/corpus_i32\n' > "$WORK/nan.txt"
dargs "non-number weight" "--data-args-path '$WORK/nan.txt': entry 3 \('thirty'\) is not a number" \
  "$WORK/nan.txt"
truncate -s $((64 * 1024 * 1024 + 1)) "$WORK/huge.txt"  # sparse: no disk used
dargs "a file over the bound" "--data-args-path '$WORK/huge.txt' is 67108865 bytes" \
  "$WORK/huge.txt"
rm -f "$WORK/huge.txt"
expect_error "--data-path with --data-args-path" "--data-path and --data-args-path '$WORK/blend.txt' are exclusive" \
  tables "${common[@]}" --data-path corpora/corpus_tiny --data-args-path "$WORK/blend.txt" \
  --out "$WORK/x"
expect_error "misspelt flag" "did you mean '--data-args-path'" \
  tables "${common[@]}" --data-args-pth "$WORK/blend.txt" --out "$WORK/x"

psplit() {
  printf '%s' "$2" > "$WORK/bad.json"
  expect_error "$1" "--per-split-data-args-path '$WORK/bad.json'.*$3" \
    tables "${split_common[@]}" --per-split-data-args-path "$WORK/bad.json" --out "$WORK/x"
}
psplit "bad JSON" '{"train": ["corpora/corpus_tiny"],' "is not valid JSON"
psplit "not an object" '["corpora/corpus_tiny"]' "must be a JSON object"
psplit "a missing key" '{"train": ["corpora/corpus_tiny"], "valid": null}' 'has no key "test"'
psplit "an empty list" '{"train": [], "valid": null, "test": null}' '"train" is empty'
psplit "odd count" '{"train": [0.6, "corpora/corpus_u16", 0.4], "valid": null, "test": null}' \
  '"train" holds 3 entries, an odd count'
psplit "non-number weight" \
  '{"train": ["0.6", "corpora/corpus_u16", "x", "corpora/corpus_i32"], "valid": null, "test": null}' \
  "\"train\": entry 3 \('x'\) is not a number"
psplit "a number as a prefix" '{"train": ["corpora/corpus_u16", 3, "corpora/corpus_i32"], "valid": null, "test": null}' \
  "entry 2 \(3\) is a number where a prefix is expected"
psplit "a wrong type" '{"train": {"a": 1}, "valid": null, "test": null}' "must be a list"
psplit "all null" '{"train": null, "valid": null, "test": null}' "names no dataset"
# More values than the bound, refused before parsing (2^22 + 1 commas).
/usr/bin/python3 -c "import sys; sys.stdout.write('{\"train\": [' + '1,' * (1 << 22) + '1], \"valid\": null, \"test\": null}')" \
  > "$WORK/many.json"
expect_error "too many JSON values" "--per-split-data-args-path '$WORK/many.json' holds more than 4194304 JSON values" \
  tables "${split_common[@]}" --per-split-data-args-path "$WORK/many.json" --out "$WORK/x"
psplit "too deep" '{"train": [[[[[[[[["a"]]]]]]]]], "valid": null, "test": null}' "nests deeper"
expect_error "--per-split-data-args-path with --split" \
  "--split '1,1,1' and --per-split-data-args-path '$WORK/splits.json' are incompatible" \
  tables "${split_common[@]}" --split 1,1,1 --per-split-data-args-path "$WORK/splits.json" \
  --out "$WORK/x"
expect_error "--per-split-data-args-path with --train-data-path" \
  "--train/valid/test-data-path and --per-split-data-args-path '$WORK/splits.json' are exclusive" \
  tables "${split_common[@]}" --train-data-path corpora/corpus_tiny \
  --per-split-data-args-path "$WORK/splits.json" --out "$WORK/x"
expect_error "--data-args-path with --per-split-data-args-path" \
  "--data-args-path '$WORK/blend.txt' \(one blend split by --split\) and per-split lists" \
  tables "${split_common[@]}" --data-args-path "$WORK/blend.txt" \
  --per-split-data-args-path "$WORK/splits.json" --out "$WORK/x"

seqfile() {
  printf '%s' "$2" > "$WORK/bad_seq.json"
  expect_error "$1" "--per-dataset-sequences-path '$WORK/bad_seq.json'.*$3" \
    tables "${common[@]}" --data-path "${blend[@]}" --per-dataset-sequences-path "$WORK/bad_seq.json" \
    --out "$WORK/x"
}
seqfile "sequences: bad JSON" '{"corpora/corpus_u16": [2001, 2002]' "is not valid JSON"
seqfile "sequences: not an object" '[[2001, 2002]]' "must be a JSON object"
seqfile "sequences: one count" '{"corpora/corpus_u16": [2001]}' \
  '"corpora/corpus_u16" must be \[sequence count, document count\]'
seqfile "sequences: negative" '{"corpora/corpus_u16": [2001, -1]}' \
  "the document count -1 is not an integer in \[0, 2\^62\)"
seqfile "sequences: not an integer" '{"corpora/corpus_u16": ["2001", 2002]}' \
  'the sequence count "2001" is not an integer'
expect_error "sequences: missing file" "cannot open --per-dataset-sequences-path '$WORK/none.json'" \
  tables "${common[@]}" --data-path "${blend[@]}" --per-dataset-sequences-path "$WORK/none.json" \
  --out "$WORK/x"
expect_error "inspect without prefixes" "needs prefixes" \
  inspect --per-dataset-sequences-out "$WORK/y.json"
expect_error "inspect of a missing store" "corpora/nothing" \
  inspect --per-dataset-sequences-out "$WORK/y.json" --data-path corpora/nothing
[ ! -e "$WORK/y.json" ] || fail "a refused inspect wrote $WORK/y.json"
echo "data_args_test: all passed"
