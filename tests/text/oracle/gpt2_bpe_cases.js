// Oracle for Megatron's GPT2BPETokenizer (tests/text/gpt2_bpe_tokenizer_test.cc).
// At Megatron d98e8a6 GPT2BPETokenizer is transformers' AutoTokenizer("gpt2") behind Megatron's
// HuggingFaceTokenizer (megatron_hf_tokenizer.py): the `gpt2` tokenizer.json, whose only added
// token is the special "<|endoftext|>", and whose ByteLevel post-processor adds nothing; so
// text_to_ids = HF's encode with special tokens, ids_to_text(remove_special_tokens=True) = HF's
// decode skipping special tokens. Runs the real `tokenizers` library (npm, Rust) on the golden
// set's gpt2 tokenizer.json.
//   node tests/text/oracle/gpt2_bpe_cases.js > tests/text/data/gpt2_bpe_cases.json
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('/work/oracle/node_modules/tokenizers');
const root = path.resolve(__dirname, '../../..');
const tokPath = path.join(root, 'tests/golden/hf-tokenizers/tokenizers/gpt2/tokenizer.json');
const texts = JSON.parse(fs.readFileSync(path.join(__dirname, 'megatron_tokenizer_texts.json')));
for (const f of ['edge', 'mixed']) {
  const p = path.join(root, `tests/golden/hf-tokenizers/prep/texts/${f}.jsonl`);
  for (const line of fs.readFileSync(p, 'utf8').split('\n')) {
    if (line.trim()) texts.push(JSON.parse(line).text);
  }
}
(async () => {
  const t = Tokenizer.fromFile(tokPath);
  const cases = [];
  for (const text of texts) {
    const ids = Array.from((await t.encode(text, null, {addSpecialTokens: true})).getIds());
    const decoded = await t.decode(ids, true);
    cases.push({text, ids, decoded});
  }
  process.stdout.write(JSON.stringify({oracle: 'npm tokenizers on gpt2 tokenizer.json', cases}) + '\n');
})();
