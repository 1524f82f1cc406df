// Oracle for tests/text/hf_unigram_test.cc and hf_wordpiece_test.cc: encodes pre-tokenized
// pieces with the real `tokenizers` library (npm, /work/oracle) through a tokenizer.json whose
// normalizer, pre-tokenizer, post-processor, added tokens, truncation and padding are null, so
// that the ids are the model's alone. Writes tests/text/data/hf_model_cases.json:
// {"cases": [{"name", "model" (JSON) or "model_file" (tokenizer.json under
// tests/golden/hf-tokenizers), "pieces": [...], "ids": [[...] or null (the library refused)]}]}.
// Run from the repository root:
//   node tests/text/oracle/hf_model_cases.js > tests/text/data/hf_model_cases.json
const { Tokenizer } = require('/work/oracle/node_modules/tokenizers');
const fs = require('fs');

const GOLDEN = 'tests/golden/hf-tokenizers';
const texts = [];
for (const f of ['edge', 'mixed']) {
  for (const line of fs.readFileSync(`${GOLDEN}/prep/texts/${f}.jsonl`, 'utf8').split('\n')) {
    if (line.trim()) texts.push(JSON.parse(line).text);
  }
}
// Whitespace-separated words of the golden texts (first `n`, distinct), plus odd ones.
function words(n) {
  const seen = new Set();
  for (const t of texts) {
    for (const w of t.split(/\s+/u)) if (w && !seen.has(w) && seen.size < n) seen.add(w);
  }
  return [...seen];
}
const odd = ['<unk>', 'a<unk>b', '😀😀x😀', '\u0000\u0001', '日本語のテキスト', 'ᄀᄀᄀ', 'x'.repeat(150),
  'a'.repeat(101), 'a'.repeat(100), '🇯🇵', 'é', 'é', '\uFFFF\uE000', 'Ω≈ç√∫'];

const cases = [];
const W = words(900);
const t5 = JSON.parse(fs.readFileSync(`${GOLDEN}/extra/t5/tokenizer.json`, 'utf8'));
cases.push({ name: 't5 unigram, pieces as Metaspace makes them', model_file: 'extra/t5/tokenizer.json',
  model: t5.model, pieces: [...W.map((w) => '▁' + w), ...odd.map((w) => '▁' + w), ...W.slice(0, 200), ...odd] });
const bert = JSON.parse(fs.readFileSync(`${GOLDEN}/extra/bert-base-uncased/tokenizer.json`, 'utf8'));
cases.push({ name: 'bert wordpiece', model_file: 'extra/bert-base-uncased/tokenizer.json', model: bert.model,
  pieces: [...W.map((w) => w.toLowerCase()), ...W.slice(0, 100), ...odd, '##a', 'un##', 'unaffable'] });

// Small Unigram models.
const bytes = [];
for (let b = 0; b < 256; b++) bytes.push([`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, -20]);
const small = [['<unk>', 0], ['a', -1], ['b', -1.5], ['ab', -2], ['abc', -3.5], ['c', -2], ['bc', -2.5],
  ['▁', -0.5], ['▁a', -1.25], ['日', -3], ['日本', -4]];
const smallPieces = ['abc', 'abcabc', 'ab', 'ba', 'cab', 'x', 'xx', 'axxb', 'a日本b', '日日本本', 'é', 'aé😀b',
  '▁a▁ab', '<unk>', 'a<unk>', '<0x41>', '本'];
cases.push({ name: 'unigram with unk', model: { type: 'Unigram', unk_id: 0, vocab: small, byte_fallback: false }, pieces: smallPieces });
cases.push({ name: 'unigram unk not first', model: { type: 'Unigram', unk_id: 3, vocab: [...small.slice(1, 4), ['<unk>', 0], ...small.slice(4)] }, pieces: smallPieces });
cases.push({ name: 'unigram byte_fallback', model: { type: 'Unigram', unk_id: 0, vocab: [...small, ...bytes], byte_fallback: true }, pieces: smallPieces });
cases.push({ name: 'unigram byte_fallback missing bytes', model: { type: 'Unigram', unk_id: 0, vocab: [...small, ...bytes.slice(0, 0xF0)], byte_fallback: true }, pieces: smallPieces });
cases.push({ name: 'unigram no unk_id', model: { type: 'Unigram', unk_id: null, vocab: small.slice(1) }, pieces: smallPieces });
cases.push({ name: 'unigram ties', model: { type: 'Unigram', unk_id: 0, vocab: [['<unk>', 0], ['a', -1], ['b', -1], ['ab', -2], ['aa', -2], ['aaa', -3], ['ba', -2]] },
  pieces: ['ab', 'aa', 'aaa', 'aaaa', 'aba', 'abab', 'baab', 'bbb'] });
cases.push({ name: 'unigram duplicate pieces', model: { type: 'Unigram', unk_id: 0, vocab: [['<unk>', 0], ['a', -1], ['b', -3], ['a', -5], ['ab', -7]] },
  pieces: ['a', 'ab', 'aab', 'b'] });
cases.push({ name: 'unigram positive scores', model: { type: 'Unigram', unk_id: 0, vocab: [['<unk>', 5], ['a', 3], ['b', 30], ['ab', 20]] },
  pieces: ['ab', 'xab', 'xyz', 'abab'] });
// Small WordPiece / WordLevel models.
const wpVocab = { '[UNK]': 0, un: 1, '##aff': 2, '##able': 3, aff: 4, '##a': 5, a: 6, '##b': 7, 'é': 8, '##é': 9, '##': 10 };
const wpPieces = ['unaffable', 'affable', 'aab', 'ab', 'aé', 'éé', 'x', 'ax', 'abc', 'a##', '##', 'ababababab'];
cases.push({ name: 'wordpiece small', model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 8, vocab: wpVocab }, pieces: wpPieces });
cases.push({ name: 'wordpiece empty prefix', model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '', max_input_chars_per_word: 100, vocab: wpVocab }, pieces: wpPieces });
cases.push({ name: 'wordpiece missing unk', model: { type: 'WordPiece', unk_token: '<nope>', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: wpVocab }, pieces: wpPieces });
cases.push({ name: 'wordlevel', model: { type: 'WordLevel', unk_token: '[UNK]', vocab: wpVocab }, pieces: ['un', 'aff', 'x', '##a', 'é'] });
cases.push({ name: 'wordlevel missing unk', model: { type: 'WordLevel', unk_token: '<nope>', vocab: wpVocab }, pieces: ['un', 'x'] });

(async () => {
  const out = [];
  for (const c of cases) {
    const tj = { version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
      pre_tokenizer: null, post_processor: null, decoder: null, model: c.model };
    const t = Tokenizer.fromString(JSON.stringify(tj));
    const ids = [];
    for (const p of c.pieces) {
      try {
        ids.push((await t.encode(p, null, { addSpecialTokens: false })).getIds());
      } catch (e) {
        ids.push(null);
      }
    }
    // The BERT fixture's model has no "type" (the library accepts that, untagged).
    const r = { name: c.name, model_type: c.model.type || 'WordPiece' };
    if (c.model_file) r.model_file = c.model_file; else r.model = c.model;
    r.pieces = c.pieces;
    r.ids = ids;
    out.push(r);
  }
  process.stdout.write(JSON.stringify({ cases: out }) + '\n');
})();
