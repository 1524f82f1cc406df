// node tokenizer_speed.js TOKENIZER_JSON TEXTS.jsonl IDS_OUT [PASSES]
//
// The Hugging Face library's side of tests/bench/tokenizer_speed.sh (its Node binding, npm
// package `tokenizers`, found on NODE_PATH; run it with RAYON_NUM_THREADS=1): encodes every
// {"text": ...} line with add_special_tokens, PASSES times (default 3) one text per call, and
// PASSES times as one encodeBatch call; writes the ids of the first pass to IDS_OUT (one line per
// text, ids separated by spaces) and prints one JSON line like tokenizer_speed_tool's, whose
// "seconds" is the fastest pass of either way (the library's best).
const { Tokenizer } = require('tokenizers');
const fs = require('fs');

async function main() {
  const [file, textsFile, idsOut, passArg] = process.argv.slice(2);
  if (!file || !textsFile || !idsOut) {
    console.error('usage: tokenizer_speed.js TOKENIZER_JSON TEXTS.jsonl IDS_OUT [PASSES]');
    process.exit(2);
  }
  const passes = Number(passArg || 3);
  const t = Tokenizer.fromFile(file);
  t.disableTruncation();
  t.disablePadding();
  const texts = fs.readFileSync(textsFile, 'utf8').split('\n').filter((l) => l.length > 0)
    .map((l) => JSON.parse(l).text);
  const bytes = texts.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  const opts = { addSpecialTokens: true };
  let first = null;
  let best = Infinity;
  let bestWay = '';
  let tokens = 0;
  for (let pass = 0; pass < passes; pass++) {
    const ids = [];
    const t0 = process.hrtime.bigint();
    for (const s of texts) ids.push((await t.encode(s, null, opts)).getIds());
    const sec = Number(process.hrtime.bigint() - t0) / 1e9;
    if (sec < best) { best = sec; bestWay = 'encode'; }
    if (first === null) first = ids;
    tokens = ids.reduce((n, a) => n + a.length, 0);
  }
  for (let pass = 0; pass < passes; pass++) {
    const t0 = process.hrtime.bigint();
    const encs = await t.encodeBatch(texts, opts);
    const ids = encs.map((e) => e.getIds());
    const sec = Number(process.hrtime.bigint() - t0) / 1e9;
    if (sec < best) { best = sec; bestWay = 'encodeBatch'; }
    for (let i = 0; i < ids.length; i++) {
      if (ids[i].join(' ') !== first[i].join(' ')) throw new Error(`encodeBatch differs at ${i}`);
    }
  }
  fs.writeFileSync(idsOut, first.map((a) => a.join(' ') + '\n').join(''));
  console.log(JSON.stringify({ tokens, bytes, seconds: best, passes, way: bestWay }));
}

main().catch((e) => { console.error(`tokenizer_speed.js: ${e.stack || e}`); process.exit(1); });
