#!/usr/bin/env bash
# The prep/inspect command line as a user runs it: SentencePiece prep of real text,
# pretokenized prep reproducing golden corpora byte for byte, and clear failures.
set -euo pipefail
GRIDFEED=$1
GOLDEN=$2
WORK=$(mktemp -d /tmp/gridfeed_cli.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. SentencePiece: a small model trained on Genesis, then prep + inspect --json.
bible -f gen1:1-gen50:26 > "$WORK/gen.txt"
spm_train --input="$WORK/gen.txt" --model_prefix="$WORK/sp" --vocab_size=800 \
  --model_type=bpe --minloglevel=2 >/dev/null 2>&1
awk 'NF { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "{\"text\": \"%s\"}\n", $0 }' \
  "$WORK/gen.txt" | gzip > "$WORK/gen.jsonl.gz"
"$GRIDFEED" prep --input "$WORK/gen.jsonl.gz" --output-prefix "$WORK/gen" \
  --tokenizer-model "$WORK/sp.model" --append-eod > "$WORK/prep.out"
grep -q "documents" "$WORK/prep.out" || fail "no prep summary"
"$GRIDFEED" inspect "$WORK/gen" --json --dump "$WORK/dump" > "$WORK/inspect.json"
python3 - "$WORK/inspect.json" "$WORK/gen.jsonl.gz" <<'PY'
import gzip, json, sys
j = json.load(open(sys.argv[1]))
for k in ("dtype", "dtype_code", "sequences", "documents", "tokens"):
    assert k in j, k
lines = sum(1 for _ in gzip.open(sys.argv[2]))
assert j["dtype"] == "uint16" and j["dtype_code"] == 8, j
assert j["documents"] == lines, (j, lines)
assert j["tokens"] > j["sequences"] > 0, j
PY
for f in lengths pointers document_indices; do
  [ -s "$WORK/dump/$f.npy" ] || fail "missing $f.npy"
done
"$GRIDFEED" inspect "$WORK/gen" | grep -q "median" || fail "text summary"

# 2. Pretokenized prep reproduces golden corpora (uint16, int32, multi-sequence documents).
for spec in corpus_u16:50000 corpus_i32:128256 corpus_multi:50000; do
  name=${spec%%:*}; vocab=${spec##*:}
  python3 - "$GOLDEN/corpora/$name" > "$WORK/$name.jsonl" <<'PY'
import json, struct, sys
p = sys.argv[1]
idx = open(p + ".idx", "rb").read(); binf = open(p + ".bin", "rb").read()
code = idx[17]; s, d = struct.unpack_from("<QQ", idx, 18)
lens = struct.unpack_from("<%di" % s, idx, 34)
ptrs = struct.unpack_from("<%dq" % s, idx, 34 + 4 * s)
docs = struct.unpack_from("<%dq" % d, idx, 34 + 12 * s)
fmt, size = {8: ("H", 2), 4: ("i", 4)}[code]
for a, b in zip(docs, docs[1:]):
    seqs = [list(struct.unpack_from("<%d%s" % (lens[i], fmt), binf, ptrs[i])) for i in range(a, b)]
    print(json.dumps({"ids": seqs}))
PY
  "$GRIDFEED" prep --input "$WORK/$name.jsonl" --output-prefix "$WORK/$name" --pretokenized \
    --json-key ids --vocab-size "$vocab" >/dev/null
  cmp "$WORK/$name.bin" "$GOLDEN/corpora/$name.bin" || fail "$name.bin differs"
  cmp "$WORK/$name.idx" "$GOLDEN/corpora/$name.idx" || fail "$name.idx differs"
done

# 3. Failures are clear and leave nothing behind.
printf '{"ids": [1]}\nnot json\n' > "$WORK/bad.jsonl"
if "$GRIDFEED" prep --input "$WORK/bad.jsonl" --output-prefix "$WORK/bad" --pretokenized \
    --json-key ids --vocab-size 10 2> "$WORK/bad.err"; then fail "bad line accepted"; fi
grep -q "line 2" "$WORK/bad.err" || fail "no line number: $(cat "$WORK/bad.err")"
[ ! -e "$WORK/bad.bin" ] && [ ! -e "$WORK/bad.idx" ] || fail "half-written output left"
printf 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX' > "$WORK/junk.idx"; : > "$WORK/junk.bin"
if "$GRIDFEED" inspect "$WORK/junk" 2> "$WORK/junk.err"; then fail "junk index accepted"; fi
grep -q "magic" "$WORK/junk.err" || fail "unclear error: $(cat "$WORK/junk.err")"
# 4. --eod-id without --append-eod is an error naming both flags.
printf '{"ids": [1]}\n' > "$WORK/one.jsonl"
if "$GRIDFEED" prep --input "$WORK/one.jsonl" --output-prefix "$WORK/one" --pretokenized \
    --json-key ids --vocab-size 10 --eod-id 0 2> "$WORK/eod.err"; then
  fail "--eod-id without --append-eod accepted"
fi
grep -q -- "--eod-id" "$WORK/eod.err" && grep -q -- "--append-eod" "$WORK/eod.err" ||
  fail "unclear --eod-id error: $(cat "$WORK/eod.err")"

# 5. A prep killed by SIGINT or SIGTERM leaves no temporary files. The input is a FIFO this
# shell holds open, so prep waits for more input with its temporaries created.
mkfifo "$WORK/slow.jsonl"
set -m  # background jobs keep SIGINT (a non-interactive shell would ignore it for them)
for sig in INT TERM; do
  mkdir "$WORK/kill_$sig"
  exec 3<>"$WORK/slow.jsonl"
  printf '{"ids": [1]}\n' >&3
  "$GRIDFEED" prep --input "$WORK/slow.jsonl" --output-prefix "$WORK/kill_$sig/out" \
    --pretokenized --json-key ids --vocab-size 10 --workers 1 &
  prep=$!
  for _ in $(seq 200); do
    compgen -G "$WORK/kill_$sig/out.bin.tmp*" >/dev/null && break
    sleep 0.05
  done
  compgen -G "$WORK/kill_$sig/out.bin.tmp*" >/dev/null || fail "prep made no temporary file"
  kill -s "$sig" "$prep"
  rc=0
  wait "$prep" || rc=$?
  exec 3>&-
  [ "$rc" -ge 128 ] || fail "prep was not killed by SIG$sig (exit $rc)"
  left=$(ls -A "$WORK/kill_$sig")
  [ -z "$left" ] || fail "SIG$sig left files behind: $left"
done
set +m

echo "cli prep/inspect: ok"
