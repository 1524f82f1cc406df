// Oracle for tests/text/hf_pre_tokenizer_test.cc and hf_normalizer_test.cc: runs every
// pre-tokenizer / normalizer below on every text through the real `tokenizers` library (npm,
// /work/oracle): a tokenizer.json holding the component and a WordLevel model is loaded with
// Tokenizer.fromString (so the library's own deserializer reads the component), then
// getPreTokenizer().preTokenizeString(text) / getNormalizer().normalizeString(text).
// Writes {"pre_tokenizers": [{"component", "texts": [[text, pieces | null]...]} | {"component",
// "error": msg}], "normalizers": [... same with the normalized string ...]}; null = the library
// failed on that text.
// Run: node tests/text/oracle/hf_component_cases.js > tests/text/data/hf_component_cases.json
const { Tokenizer } = require('/work/oracle/node_modules/tokenizers');

const base = {
  version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
  pre_tokenizer: null, post_processor: null, decoder: null,
  model: { type: 'WordLevel', vocab: { a: 0 }, unk_token: 'a' },
};

// Deterministic pseudo-random texts from an alphabet of troublesome pieces.
let seed = 12345;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const atoms = [' ', '  ', '\t', '\n', '\r\n', '\u2028', '\u0085', '\u00a0', '\u3000', '\0', 'a', 'Z',
  'hello', 'World', "'s", "'S", "'LL", "'re", "'", '1', '12345', '٣', '²', '½', '.', ',', '!?', '--',
  '...', '$', '_', '@', '(', ')', '{', '}', '"', '#', 'é', 'e\u0301', 'İ', 'ß', 'Σ', 'ΣΑΣ', 'ǅ',
  '日本語', '中', '한국어', '\u1100\u1161', 'ไทย', 'عربي', 'हिन्दी', 'Ελληνικά', 'привет', '👍',
  '👨‍👩‍👧', '🇫🇷', '1️⃣', '\ufeff', '\u200b', '\ue000', '\u{e0041}', '＄', 'ｆｕｌｌ', 'ﬁ', '™', '\u00ad',
  '\u0300', '\u0600', '\u{1d400}', '▁', 'Ġ', '\u000b', '\u000c', '\u001f', '\u007f', '~'];
const randomText = () => {
  const n = 1 + rand(12);
  let s = '';
  for (let i = 0; i < n; i++) s += atoms[rand(atoms.length)];
  return s;
};

const edge = [
  '', ' ', 'a', 'Hello world', ' Hello  world ', 'Hello   world\n\n  x', "I'm don't we'll they're I've he'd it's",
  "HE'S THEY'LL WE'RE I'VE SHE'D IT'S I'M", '   leading', 'trailing   ', '\t\ttabs\tand spaces \t',
  'a\r\nb\rc\nd', 'line\u2028sep\u2029para\u0085nel', 'nul\0byte\0', '\u0001\u0002\u001b[0m',
  '123 4567 89012345678901234567890', 'x1y22z333', '3.14159 -42 1,000,000', '٣٤٥ ²³ ½ Ⅻ',
  'def f(x):\n    return x**2  # sq\n', 'if (a&&b) { c->d[0] = "s"; }', '{"k": [1, 2.5, null]}',
  '<div class="x">&amp;</div>', 'SELECT * FROM t WHERE a<>b;', '日本語のテキスト、句読点。',
  '中文，标点！“引号”', '한국어 텍스트 \u1100\u1161\u11a8', 'ภาษาไทย', 'مرحبا بالعالم', 'नमस्ते दुनिया',
  'שלום עולם', 'Привет, мир!', 'Γειά σου Κόσμε ΣΑΣ ΟΔΟΣ', 'café naïve résumé', 'cafe\u0301 nai\u0308ve',
  '👨‍👩‍👧‍👦 👍🏽 🇯🇵 1️⃣ #️⃣', 'ｆｕｌｌ　ｗｉｄｔｈ １２３ ＡＢＣ', 'ﬁ ﬀ ™ ℌ ① ㍿', 'İstanbul ıi ǅ ß ẞ ŉ',
  '\ufeffbom \u200bzw\u200dj \u00adsoft', '\ue000\u{f0000} \u{e0041}\u{e007f} \ufdd0\uffff',
  'x\u0300\u0301\u0302 \u0f71\u0f72', 'a' .repeat(300), 'word '.repeat(50), '!!!???...,,,',
  '▁already▁meta', 'ĠĊ byte chars', '<|endoftext|> </s> <s>', 'tab\there', '  \n  ', '\n',
  'A.B,C;D:E!F?G', '(nested [brackets {here}])', '$100 & 50% @home #tag ~tilde `tick`',
  'don’t “curly” ‘quotes’ — dash – en … ellipsis', '¡Hola! ¿Qué?', '«guillemets» ‹single›',
];
const texts = edge.concat(Array.from({ length: 50 }, randomText));

function run(kind, component, inputs) {
  const tj = Object.assign({}, base, { [kind]: component });
  let t;
  try {
    t = Tokenizer.fromString(JSON.stringify(tj));
  } catch (e) {
    return { component, error: String(e.message || e).slice(0, 200) };
  }
  const results = inputs.map((s) => {
    try {
      if (kind === 'pre_tokenizer') {
        return [s, t.getPreTokenizer().preTokenizeString(s).map((p) => p[0])];
      }
      return [s, t.getNormalizer().normalizeString(s)];
    } catch (e) {
      return [s, null];
    }
  });
  return { component, texts: results };
}

const gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const cl100k = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const qwen2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const byteLevel = (add_prefix_space, use_regex) => ({ type: 'ByteLevel', add_prefix_space, trim_offsets: true, use_regex });
const split = (pattern, behavior, invert) => ({ type: 'Split', pattern, behavior, invert });
const behaviors = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

const pre = [
  byteLevel(false, true), byteLevel(true, true), byteLevel(false, false), byteLevel(true, false),
  { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false },  // use_regex defaults to true
  { type: 'ByteLevel', trim_offsets: true },                             // add_prefix_space missing
  split({ Regex: cl100k }, 'Removed', true),
  split({ Regex: qwen2 }, 'Isolated', false),
  split({ Regex: gpt2 }, 'Isolated', false),
  { type: 'Sequence', pretokenizers: [split({ Regex: cl100k }, 'Removed', true), byteLevel(false, false)] },
  { type: 'Sequence', pretokenizers: [split({ Regex: '\\p{N}{1,3}' }, 'Isolated', false), byteLevel(true, true)] },
  { type: 'Sequence', pretokenizers: [] },
  split({ Regex: 'x*' }, 'Isolated', false),            // empty matches everywhere
  split({ Regex: '(?=a)|$' }, 'MergedWithNext', false),   // empty matches, lookahead
  split({ Regex: '\\b' }, 'Isolated', false),
  split({ Regex: '' }, 'Removed', true),
  split({ String: '' }, 'Isolated', false),
  split({ String: '.' }, 'Removed', false),
  split({ String: '\\p{L}' }, 'Isolated', false),
  split({ String: 'a.b(c)|[d]{e}^$#&-~ ?' }, 'Isolated', false),
  split({ Regex: '[' }, 'Isolated', false),               // does not compile
  split({ Regex: '\\s' }, 'Bogus', false),
  { type: 'Split', pattern: { Regex: '\\s' }, behavior: 'Isolated' },  // invert missing
  { type: 'Split', pattern: { Other: 'x' }, behavior: 'Isolated', invert: false },
  { type: 'NoSuchPreTokenizer' },
  // Metaspace: prepend_scheme, the legacy add_prefix_space, split; "first" after a Split (the
  // pieces after the first do not start the input).
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: false },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: false },
  { type: 'Metaspace', replacement: '▁', add_prefix_space: true },
  { type: 'Metaspace', replacement: '▁', add_prefix_space: false, prepend_scheme: 'never' },
  { type: 'Metaspace', replacement: '▁', add_prefix_space: false },
  { type: 'Metaspace', replacement: '▁', add_prefix_space: true, prepend_scheme: 'first', split: false, str_rep: '▁' },
  { type: 'Metaspace', replacement: '_', prepend_scheme: 'always', split: true },
  { type: 'Metaspace', replacement: 'ab', prepend_scheme: 'always', split: true },
  { type: 'Metaspace', prepend_scheme: 'always', split: true },
  { type: 'Metaspace', replacement: '▁', prepend_scheme: 'sometimes', split: true },
  { type: 'Sequence', pretokenizers: [split({ Regex: '\\d+' }, 'Isolated', false),
    { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true }] },
  { type: 'Sequence', pretokenizers: [split({ String: ' ' }, 'MergedWithPrevious', false),
    { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false }] },
  { type: 'Digits', individual_digits: true },
  { type: 'Digits', individual_digits: false },
  { type: 'Digits' },
  { type: 'Whitespace' },
  { type: 'WhitespaceSplit' },
  { type: 'Punctuation' },
  { type: 'BertPreTokenizer' },
  { type: 'CharDelimiterSplit', delimiter: ' ' },
  { type: 'CharDelimiterSplit', delimiter: 'é' },
  { type: 'CharDelimiterSplit', delimiter: '' },
  { type: 'Delimiter', delimiter: ' ' },  // the wrapper's variant name is not a type the library reads
  { type: 'UnicodeScripts' },
  { type: 'FixedLength', length: 3 },
  // Falcon's: Punctuation, Digits, ByteLevel
  { type: 'Sequence', pretokenizers: [{ type: 'Punctuation', behavior: 'Contiguous' },
    byteLevel(false, true), { type: 'Digits', individual_digits: false },
    split({ Regex: '[0-9][0-9][0-9]' }, 'Isolated', false)] },
  { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }] },
];
for (const b of behaviors) {
  pre.push({ type: 'Punctuation', behavior: b });
  for (const inv of [false, true]) {
    pre.push(split({ String: ' ' }, b, inv));
    pre.push(split({ Regex: '\\s+|[.,!?]' }, b, inv));
    pre.push(split({ Regex: '\\d|(?=x)' }, b, inv));
  }
}

const norm = [
  { type: 'Prepend', prepend: '▁' },
  { type: 'Prepend', prepend: 'ab ' },
  { type: 'Prepend', prepend: '' },
  { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
  { type: 'Replace', pattern: { String: '  ' }, content: ' ' },
  { type: 'Replace', pattern: { String: '.' }, content: '' },
  { type: 'Replace', pattern: { String: '' }, content: '|' },
  { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' },
  { type: 'Replace', pattern: { Regex: ' {2,}' }, content: '▁' },
  { type: 'Replace', pattern: { Regex: 'x*' }, content: '-' },
  { type: 'Replace', pattern: { Regex: '(?i)é|E' }, content: 'É' },
  { type: 'Replace', pattern: { Regex: '\\p{Mn}' }, content: '' },
  { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
  { type: 'Sequence', normalizers: [] },
  { type: 'Replace', pattern: { Regex: '(' }, content: '' },
  { type: 'Replace', pattern: { String: 'a' } },
  { type: 'Prepend' },
  { type: 'NoSuchNormalizer' },
  { type: 'NFC' }, { type: 'NFD' }, { type: 'NFKC' }, { type: 'NFKD' },
  { type: 'Lowercase' }, { type: 'StripAccents' }, { type: 'Nmt' }, { type: 'ByteLevel' },
  { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' }] },
  { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'StripAccents' }, { type: 'Lowercase' }] },
  { type: 'Strip', strip_left: true, strip_right: true },
  { type: 'Strip', strip_left: true, strip_right: false },
  { type: 'Strip', strip_left: false, strip_right: true },
  { type: 'Strip', strip_left: false, strip_right: false },
  { type: 'Strip', strip_left: true },
  { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
  { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: false },
  { type: 'BertNormalizer', clean_text: false, handle_chinese_chars: false, strip_accents: true, lowercase: false },
  { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: false, strip_accents: false, lowercase: true },
  { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, lowercase: true },
  { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null },
  { type: 'Bert', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
  { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }, { type: 'Prepend', prepend: '▁' }] },
];

const out = {
  pre_tokenizers: pre.map((c) => run('pre_tokenizer', c, texts)),
  normalizers: norm.map((c) => run('normalizer', c, texts)),
};
process.stdout.write(JSON.stringify(out, null, 0) + '\n');
