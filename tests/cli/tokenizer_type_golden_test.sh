#!/usr/bin/env bash
# SFT and FIM with Megatron's tokenizer flags: the Hugging Face golden sets pass unchanged with
# --tokenizer-type HuggingFaceTokenizer added to every command (the golden scripts run a wrapper
# that appends it), and flags a type needs or does not read are refused by name.
# Usage: tokenizer_type_golden_test.sh GRIDFEED HF_GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/gridfeed_toktype.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/gridfeed" <<SH
#!/usr/bin/env bash
exec "$GRIDFEED" "\$@" --tokenizer-type HuggingFaceTokenizer
SH
chmod +x "$WORK/gridfeed"
bash "$HERE/sft_golden_test.sh" "$WORK/gridfeed" "$GOLDEN/sft"
bash "$HERE/fim_golden_test.sh" "$WORK/gridfeed" "$GOLDEN/fim"

expect_error() {  # message fragment, flags...
  local want=$1; shift
  if "$GRIDFEED" "$@" > "$WORK/err" 2>&1; then echo "FAIL: accepted: $*"; exit 1; fi
  grep -qF -- "$want" "$WORK/err" || { cat "$WORK/err"; echo "FAIL: no '$want' for: $*"; exit 1; }
}
cd "$GOLDEN/sft"
base=(samples --sft --data-path corpora/sft_v.jsonl --split 100,0,0 --train-samples 4
      --valid-samples 0 --test-samples 0 --seq-length 64 --positions 0 --out "$WORK/e")
expect_error "--vocab-file" "${base[@]}" --tokenizer-type GPT2BPETokenizer
expect_error "--vocab-size" "${base[@]}" --tokenizer-type NullTokenizer
expect_error "BertWordPieceCase" "${base[@]}" --tokenizer-type BertWordPieceCase \
  --tokenizer-model tokenizers/gpt2
expect_error "--tiktoken-pattern" "${base[@]}" --tokenizer-model tokenizers/gpt2 \
  --tiktoken-pattern v1
expect_error "--tokenizer-model" "${base[@]}"
# GPT2BPETokenizer (GPT-2's vocab.json and merges.txt) has no chat template: format default
# is refused naming it.
python3 - tokenizers/gpt2/tokenizer.json "$WORK" <<'PY'
import json, sys
tj = json.load(open(sys.argv[1]))
json.dump(tj["model"]["vocab"], open(f"{sys.argv[2]}/vocab.json", "w"), ensure_ascii=False)
with open(f"{sys.argv[2]}/merges.txt", "w") as f:
    f.write("#version: 0.2\n" + "".join(m + "\n" for m in tj["model"]["merges"]))
PY
expect_error "chat_template" "${base[@]}" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$WORK/vocab.json" --merge-file "$WORK/merges.txt" \
  --sft-tokenizer-prompt-format default
# gridfeed inspect on a tokenizer folder alone, with tokenizer flags, and on a store with its
# tokenizer: len(tokenizer) and ids from the `tokenizers` library (get_vocab_size(with added
# tokens), token_to_id), the store's largest id from numpy on its .bin.
"$GRIDFEED" inspect tokenizers/phi3 > "$WORK/phi3.txt"
for want in "kind       huggingface" "len        32011" "bos        <s> (1)" \
    "eos        <|endoftext|> (32000)" "pad        <|endoftext|> (32000)" "unk        <unk> (0)" \
    "chat_template present"; do
  grep -qF -- "$want" "$WORK/phi3.txt" || { cat "$WORK/phi3.txt"; echo "FAIL: inspect: $want"; exit 1; }
done
"$GRIDFEED" inspect --tokenizer-model tokenizers/gpt2 --json > "$WORK/gpt2.json"
/usr/bin/python3 - "$WORK/gpt2.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["tokenizer"]
assert t["len"] == 50257 and t["eos"]["id"] == 50256 and t["pad"] is None, t
assert t["unk"] == {"id": 50256, "token": "<|endoftext|>"} and t["chat_template"], t
PY
cd "$GOLDEN/fim"
"$GRIDFEED" inspect corpora/dolma2_mixed_v --tokenizer-model tokenizers/olmo2-dolma2 --json \
  > "$WORK/store.json"
/usr/bin/python3 - "$WORK/store.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tokens"] == 8846 and j["max_token_id"] == 100260, j
assert j["tokenizer"]["len"] == 100278 and j["tokenizer"]["pad"]["id"] == 100277, j
PY
"$GRIDFEED" inspect corpora/dolma2_mixed_v --tokenizer-model "$GOLDEN/sft/tokenizers/gpt2" \
  | grep -q "another tokenizer made it" || { echo "FAIL: inspect: ids beyond the tokenizer"; exit 1; }
echo "tokenizer flags: inspect names the tokenizer"
echo "tokenizer flags: golden sets equal with --tokenizer-type HuggingFaceTokenizer; 6 refusals"
