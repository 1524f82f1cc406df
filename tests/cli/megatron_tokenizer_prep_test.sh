#!/usr/bin/env bash
# `gridfeed prep` with Megatron's tokenizer flags writes the oracles' ids:
#   GPT2BPETokenizer --vocab-file --merge-file (ids of tests/text/data/gpt2_bpe_cases.json, the
#   `tokenizers` library on the gpt2 tokenizer.json), TikTokenizer with --tiktoken-pattern,
#   --tiktoken-num-special-tokens, --tokenizer-special-tokens, --vocab-size (ids of
#   tiktoken_cases.json, the real tiktoken); and refuses an unsupported --tokenizer-type by name.
# Usage: megatron_tokenizer_prep_test.sh GRIDFEED GOLDEN_MEGATRON_DIR
set -euo pipefail
GF=$1
TESTS=$(cd "$2/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 - "$TESTS" "$WORK" <<'PY'
import json, sys
tests, work = sys.argv[1], sys.argv[2]
tj = json.load(open(f"{tests}/golden/hf-tokenizers/tokenizers/gpt2/tokenizer.json"))
json.dump(tj["model"]["vocab"], open(f"{work}/vocab.json", "w"), ensure_ascii=False)
with open(f"{work}/merges.txt", "w") as f:
    f.write("#version: 0.2\n" + "".join(m + "\n" for m in tj["model"]["merges"]))
gpt2 = json.load(open(f"{tests}/text/data/gpt2_bpe_cases.json"))["cases"]
tik = json.load(open(f"{tests}/text/data/tiktoken_cases.json"))["configs"][2]
for name, cases in (("gpt2", gpt2), ("tik", tik["cases"])):
    with open(f"{work}/{name}.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps({"text": c["text"]}) + "\n")
    json.dump([c["ids"] for c in cases], open(f"{work}/{name}_expected.json", "w"))
PY

check() {  # PREFIX EXPECTED.json: every document's ids, an empty one with no sequence
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
prefix, expected = sys.argv[1], json.load(open(sys.argv[2]))
idx = open(prefix + ".idx", "rb").read()
assert idx[:9] == b"MMIDIDX\x00\x00", "not an MMIDIDX index"
dtype_code = idx[17]
nseq, ndoc = struct.unpack("<QQ", idx[18:34])
width = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 8, 8: 2}[dtype_code]
fmt = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "f", 8: "H"}[dtype_code]
binary = open(prefix + ".bin", "rb").read()
got = list(struct.unpack("<%d%s" % (len(binary) // width, fmt), binary))
want = [i for doc in expected for i in doc]
assert got == want, "ids differ"
assert nseq == sum(1 for d in expected if d), (nseq, "sequences")
assert ndoc == len(expected) + 1, (ndoc, "document indices")
print("ok", prefix, len(want), "tokens")
PY
}

"$GF" prep --input "$WORK/gpt2.jsonl" --output-prefix "$WORK/gpt2" --workers 2 \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$WORK/vocab.json" --merge-file "$WORK/merges.txt"
check "$WORK/gpt2" "$WORK/gpt2_expected.json"

"$GF" prep --input "$WORK/tik.jsonl" --output-prefix "$WORK/tik" --workers 2 \
  --tokenizer-type TikTokenizer --tokenizer-model "$TESTS/text/data/tiktoken_vocab.json" \
  --tiktoken-pattern v2 --tiktoken-num-special-tokens 10 --vocab-size 1510 \
  --tokenizer-special-tokens '<unk>' '<s>' '</s>' '<mask>' '<pad>' '<cls>' '<sep>' \
  '<fim_prefix>' '<|endoftext|>'
check "$WORK/tik" "$WORK/tik_expected.json"

if "$GF" prep --input "$WORK/gpt2.jsonl" --output-prefix "$WORK/x" \
    --tokenizer-type BertWordPieceLowerCase --tokenizer-model "$WORK" 2> "$WORK/err"; then
  echo "FAIL: BertWordPieceLowerCase was accepted"; exit 1
fi
grep -q "BertWordPieceLowerCase is one of Megatron's tokenizers that gridfeed does not support" \
  "$WORK/err" || { cat "$WORK/err"; echo "FAIL: message"; exit 1; }
if "$GF" prep --input "$WORK/gpt2.jsonl" --output-prefix "$WORK/x" \
    --tokenizer-type GPT2BPETokenizer --merge-file "$WORK/merges.txt" 2> "$WORK/err"; then
  echo "FAIL: GPT2BPETokenizer without --vocab-file was accepted"; exit 1
fi
grep -q "needs --vocab-file" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: message"; exit 1; }
echo "megatron_tokenizer_prep_test: ok"
