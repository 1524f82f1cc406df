// Oracle for tests/text/hf_decoder_test.cc: runs each decoder of the cases below through the real
// `tokenizers` library (npm, /work/oracle) and writes tests/text/data/hf_decoder_cases.json:
// {"cases": [{"decoder": {...}, "tokens": [...], "text": "..."} or {..., "error": true}]}.
// The decoder is exercised as Tokenizer.decode does it: a WordLevel model whose vocabulary holds
// the case's tokens maps them to ids, decode(ids, false) runs decode_chain and joins.
// Run: node tests/text/oracle/hf_decoder_cases.js > tests/text/data/hf_decoder_cases.json
const { Tokenizer } = require('/work/oracle/node_modules/tokenizers');

// GPT-2's byte <-> unicode alphabet, to write byte-level tokens.
function bytesToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  }
  const m = new Map();
  bs.forEach((b, i) => m.set(b, String.fromCodePoint(cs[i])));
  return m;
}
const B2U = bytesToUnicode();
const bl = (bytes) => Array.from(bytes).map((b) => B2U.get(b)).join('');
const blText = (s) => bl(Buffer.from(s, 'utf8'));

const byteLevel = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
const cases = [];
const add = (decoder, tokens) => cases.push({ decoder, tokens });

// ByteLevel
add(byteLevel, [blText('Hello'), blText(' world'), blText('!')]);
add(byteLevel, [blText(' 日本'), blText('語')]);
add(byteLevel, [bl([0xe6, 0x97]), bl([0xa5]), blText(' ok')]);       // a character split over tokens
add(byteLevel, [bl([0xe6, 0x97]), blText('x')]);                      // truncated sequence
add(byteLevel, [bl([0xff, 0xfe, 0x41])]);                             // invalid bytes
add(byteLevel, [bl([0xf0, 0x9f, 0x98]), bl([0xed, 0xa0, 0x80]), bl([0xc0, 0xaf])]);
add(byteLevel, [bl([0xe0, 0x80, 0x80, 0xf4, 0x90, 0x80, 0x80, 0xf1, 0x80])]);
add(byteLevel, ['日本', blText(' a'), 'ĠmixedÿZ', '<|endoftext|>']);  // tokens outside the alphabet kept
add(byteLevel, [blText('\n\t \r'), bl([0])]);
add(byteLevel, ['']);
// Replace
add({ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, ['▁Hello', '▁wor', 'ld▁▁', '']);
add({ type: 'Replace', pattern: { String: 'ab' }, content: 'X' }, ['aabab', 'aba', 'b']);
add({ type: 'Replace', pattern: { String: '.' }, content: '' }, ['a.b', '...', 'x']);
add({ type: 'Replace', pattern: { Regex: '\\s+' }, content: '_' }, ['a  b\t\nc', ' ', 'x']);
add({ type: 'Replace', pattern: { Regex: 'a|' }, content: '-' }, ['bab', 'aa', '']);
add({ type: 'Replace', pattern: { Regex: '[^\\p{L}]+' }, content: '' }, ['Hé1l2lo!', '日本3']);
// ByteFallback
add({ type: 'ByteFallback' }, ['<0x41>', 'b', '<0xE6>', '<0x97>', '<0xA5>', 'c']);
add({ type: 'ByteFallback' }, ['<0xE6>', '<0x97>', 'x', '<0xFF>']);
add({ type: 'ByteFallback' }, ['<0xe6>', '<0x97>', '<0xa5>', '<0xZZ>', '<0x4>', '<0x041>', '<0x+A>', '<0x-1>', '<0xé>']);
add({ type: 'ByteFallback' }, ['<0xF0>', '<0x9F>', '<0x98>', '<0x80>']);
add({ type: 'ByteFallback' }, ['<0xC0>', '<0xAF>', '<0x41>']);
// Fuse, Strip, Sequence
add({ type: 'Fuse' }, ['a', '▁b', '', 'c']);
add({ type: 'Strip', content: ' ', start: 1, stop: 0 }, ['  a ', ' b', 'c', ' ']);
add({ type: 'Strip', content: '▁', start: 2, stop: 1 }, ['▁▁▁a▁▁', '▁b▁', 'c']);
add({ type: 'Strip', content: '▁', start: 0, stop: 3 }, ['a▁▁', '▁▁▁▁b▁']);
const llama = {
  type: 'Sequence',
  decoders: [
    { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
    { type: 'ByteFallback' },
    { type: 'Fuse' },
    { type: 'Strip', content: ' ', start: 1, stop: 0 },
  ],
};
add(llama, ['▁Hello', '▁', '<0xE6>', '<0x97>', '<0xA5>', '▁world', '<0xFF>', '!']);
add(llama, ['<0x20>', '▁a']);
add({ type: 'Sequence', decoders: [] }, ['a', 'b']);
add({ type: 'Sequence', decoders: [{ type: 'ByteFallback' }, byteLevel] }, ['<0x41>', blText(' é')]);
// Metaspace
for (const scheme of ['always', 'first', 'never']) {
  for (const split of [true, false]) {
    add({ type: 'Metaspace', replacement: '▁', prepend_scheme: scheme, split },
        ['▁Hello', '▁▁wor▁ld', 'x▁', '▁']);
    add({ type: 'Metaspace', replacement: '▁', prepend_scheme: scheme, split }, ['a▁b▁', '▁c']);
  }
}
add({ type: 'Metaspace', replacement: '_', add_prefix_space: true }, ['_a_b', '_c']);
add({ type: 'Metaspace', replacement: '▁', add_prefix_space: false, prepend_scheme: 'never' }, ['▁a', '▁b']);
add({ type: 'Metaspace', replacement: '▁', add_prefix_space: false }, ['▁a']);  // library refuses
// WordPiece
add({ type: 'WordPiece', prefix: '##', cleanup: true },
    ['hello', '##s', 'world', '.', 'i', 'do', 'not', 'do', 'n', '\'', 't', ',', '!', '?', '##', 'x##y']);
add({ type: 'WordPiece', prefix: '##', cleanup: true }, ['it', '\'', 's', 'we', '\'', 've', 'they', '\'', 're', 'i', '\'', 'm', 'don', '\'', 't', 'can', 'n\'t']);
add({ type: 'WordPiece', prefix: '##', cleanup: false }, ['##a', 'b', '##c', ' .', 'd']);
add({ type: 'WordPiece', prefix: '@@', cleanup: true }, ['un', '@@do', '@@', ' . ,']);
// BPEDecoder
add({ type: 'BPEDecoder', suffix: '</w>' }, ['hel', 'lo</w>', 'wor', 'ld</w>']);
add({ type: 'BPEDecoder', suffix: '</w>' }, ['a</w>b</w>', 'c']);
add({ type: 'BPEDecoder', suffix: '' }, ['a', 'b']);
// CTC
add({ type: 'CTC', pad_token: '<pad>', word_delimiter_token: '|', cleanup: true },
    ['<pad>', 'h', 'h', 'e', '<pad>', 'l', 'l', '<pad>', 'l', 'o', '|', '|', 'w', 'o', ' .', 'r', 'l', 'd', '<pad>']);
add({ type: 'CTC', pad_token: '<pad>', word_delimiter_token: '|', cleanup: false },
    ['a', 'a', '|', '<pad>', 'b', 'x<pad>y', 'x<pad>y']);

(async () => {
  const out = [];
  for (const c of cases) {
    const vocab = {};
    c.tokens.forEach((t) => { if (!(t in vocab)) vocab[t] = Object.keys(vocab).length; });
    vocab['<unk-oracle>'] = Object.keys(vocab).length;
    const tj = {
      version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
      pre_tokenizer: null, post_processor: null, decoder: c.decoder,
      model: { type: 'WordLevel', vocab, unk_token: '<unk-oracle>' },
    };
    const r = { decoder: c.decoder, tokens: c.tokens };
    try {
      const t = Tokenizer.fromString(JSON.stringify(tj));
      r.text = await t.decode(c.tokens.map((x) => vocab[x]), false);
    } catch (e) {
      r.error = true;
    }
    out.push(r);
  }
  process.stdout.write(JSON.stringify({ cases: out }, null, 1) + '\n');
})();
