// Oracle for tests/text/hf_precompiled_test.cc: the real library's Precompiled normalizer
// (npm tokenizers, the spm_precompiled crate) built from T5's precompiled_charsmap
// (tests/golden/hf-tokenizers/extra/t5/tokenizer.json) normalizes the golden texts, targeted
// strings and seeded random strings. Writes tests/text/data/hf_precompiled_cases.json:
// {"cases": [{"in": ..., "out": ...}]}. Run from the repository root:
//   node tests/text/oracle/hf_precompiled_cases.js > tests/text/data/hf_precompiled_cases.json
const { precompiled } = require('/work/oracle/node_modules/tokenizers');
const fs = require('fs');

const GOLDEN = 'tests/golden/hf-tokenizers';
const t5 = JSON.parse(fs.readFileSync(`${GOLDEN}/extra/t5/tokenizer.json`, 'utf8'));
const bytes = [...Buffer.from(t5.normalizer.precompiled_charsmap, 'base64')];
const norm = precompiled(bytes);

const inputs = [];
for (const f of ['edge', 'mixed']) {
  for (const line of fs.readFileSync(`${GOLDEN}/prep/texts/${f}.jsonl`, 'utf8').split('\n')) {
    if (line.trim()) inputs.push(JSON.parse(line).text);
  }
}
inputs.push('', 'e\u0301', 'Ａ\u0301', 'ＡＢＣ', 'ﬁ ﬂ ﬃ', '①②③', 'ｶﾞｷﾞ', 'ｶ', 'ﾞ', '\u0000a\u0000', 'a\u0000\u0301',
  '\u3000\u00A0\u2009\u200B\u200D', '\r\n\t\u000B\u000C', '👨‍👩‍👧‍👦', '🇯🇵🇺🇸', '1️⃣', 'ﷺ', 'ﻼ', '㍻', '㌀',
  'Å Å Å', '\u1100\u1161\u11A8', '각', 'ǅ', 'ẛ̣', 'ⅷ', '½', 'x²', '™', '…', '‐‑‒–—', '“”‘’', 'ſt',
  'I\u0307', 'İstanbul', 'ß', 'ﬀ\u0301', 'क्षि', 'ন্ত্র', '\uD7FF\uE000\uFFFD', '\u0085\u2028\u2029',
  '\u00AD\u034F\u180E\uFEFF', '\u0301\u0301\u0301', 'a\u0300\u0301\u0302\u0303', '\u2F00\u2FD5', 'Ⓐⓐ');
// Seeded random strings over a pool of interesting characters.
let seed = 12345;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const pool = [...'aAzZ09 .,-_\t\n', ...'ＡＺａｚ０９！＂＃', ...'ｱｶﾞﾟｰ', ...'éèêëçñÅ', '\u0301', '\u0300', '\u0308',
  '\u3099', '\u309A', '\u200D', '\uFE0F', '\u3000', '\u00A0', ...'ﬁﬂ①⑳㍿㎏ℌℍ', ...'가각힣', '\u1100', '\u1161',
  '\u11A8', ...'日本語', '😀', '👍', '🏽', '\u0000', '\u0001', '\u007F', '\u0080', '\u00AD'];
for (let i = 0; i < 400; i++) {
  let s = '';
  const n = 1 + rnd(12);
  for (let k = 0; k < n; k++) s += pool[rnd(pool.length)];
  inputs.push(s);
}
const cases = inputs.map((s) => ({ in: s, out: norm.normalizeString(s) }));
process.stdout.write(JSON.stringify({ charsmap_file: 'extra/t5/tokenizer.json', cases }) + '\n');
