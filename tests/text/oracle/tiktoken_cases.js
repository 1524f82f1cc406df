// Oracle for Megatron's TikTokenizer (tests/text/tiktoken_tokenizer_test.cc): the real tiktoken
// (npm `tiktoken`, its Rust CoreBPE as WASM) set up as Megatron's TikTokenTokenizer sets up
// tiktoken.Encoding at d98e8a6: mergeable ranks = the vocabulary's rank + num_special_tokens
// (the list cut to vocab_size - num_special_tokens), special tokens = the list then
// "<SPECIAL_i>" fillers up to num_special_tokens with ids 0.., pattern v1/v2 verbatim;
// text_to_ids = encode(text, allowed_special="all"); ids_to_text(remove_special_tokens=True) =
// decode of the ids >= num_special_tokens with errors="replace".
//   node tests/text/oracle/tiktoken_cases.js > tests/text/data/tiktoken_cases.json
const fs = require('fs');
const path = require('path');
const {Tiktoken} = require('/work/oracle/node_modules/tiktoken');
const root = path.resolve(__dirname, '../../..');
const vocab = JSON.parse(fs.readFileSync(path.join(root, 'tests/text/data/tiktoken_vocab.json')));
const V1 = String.raw`[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`;
const V2 = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const DEFAULT_SPECIALS = ['<unk>', '<s>', '</s>', '<mask>', '<pad>', '<cls>', '<sep>'];
const texts = JSON.parse(fs.readFileSync(path.join(__dirname, 'megatron_tokenizer_texts.json')));
for (const f of ['edge', 'mixed', 'long']) {
  const p = path.join(root, `tests/golden/hf-tokenizers/prep/texts/${f}.jsonl`);
  for (const line of fs.readFileSync(p, 'utf8').split('\n')) {
    if (line.trim()) texts.push(JSON.parse(line).text);
  }
}
const configs = [
  {pattern: 'v2', num_special_tokens: 1000, special_tokens: null, vocab_size: 1000 + vocab.length},
  {pattern: 'v1', num_special_tokens: 1000, special_tokens: null, vocab_size: 1000 + vocab.length},
  {pattern: 'v2', num_special_tokens: 10,
   special_tokens: [...DEFAULT_SPECIALS, '<fim_prefix>', '<|endoftext|>'], vocab_size: 10 + 1500},
];
const out = {oracle: 'npm tiktoken ' + require('/work/oracle/node_modules/tiktoken/package.json').version,
             configs: []};
for (const c of configs) {
  const specials = [...(c.special_tokens || DEFAULT_SPECIALS)];
  for (let i = specials.length; i < c.num_special_tokens; ++i) specials.push(`<SPECIAL_${i}>`);
  const special = {};
  specials.forEach((s, i) => { special[s] = i; });
  const inner = vocab.slice(0, c.vocab_size - c.num_special_tokens);
  const bfe = inner.map((e) => `${e.token_bytes} ${e.rank + c.num_special_tokens}`).join('\n');
  const enc = new Tiktoken(bfe, special, c.pattern === 'v1' ? V1 : V2);
  const cases = [];
  for (const text of texts) {
    const ids = Array.from(enc.encode(text, 'all'));
    const kept = ids.filter((t) => t >= c.num_special_tokens);
    const decoded = new TextDecoder('utf-8').decode(enc.decode(Uint32Array.from(kept)));
    cases.push({text, ids, decoded});
  }
  enc.free();
  out.configs.push({...c, cases});
}
process.stdout.write(JSON.stringify(out) + '\n');
