// Differential check: gridfeed's Encode (through HF_ENCODE_TOOL) against the real `tokenizers`
// library on generated texts, for every folder under TOKENIZERS_DIR holding a tokenizer.json.
// Run by hf_oracle_check.sh (which finds node and the package):
//   node hf_oracle_check.js HF_ENCODE_TOOL TOKENIZERS_DIR [TEXTS_PER_TOKENIZER]
//
// The library is driven as transformers 4.x + Megatron's HuggingFaceTokenizer drive it, which is
// what gridfeed implements: special tokens of tokenizer_config.json that are not added tokens yet
// are added as special (normalized false), then Megatron re-adds eos (as sep) and bos (as cls)
// through add_special_tokens (same flags); truncation and padding off; encode with
// add_special_tokens. A class whose post-processor transformers rebuilds (Llama & co. with
// add_bos_token/add_eos_token true) is not mimicked here: the check fails for it rather than
// compare something else.
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const [tool, dir, perArg] = process.argv.slice(2);
if (!tool || !dir) {
  console.error('usage: hf_oracle_check.js HF_ENCODE_TOOL TOKENIZERS_DIR [TEXTS_PER_TOKENIZER]');
  process.exit(2);
}
const perTokenizer = Number(perArg || 400);

let seed = 20240611;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const atoms = [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', '\u2028', '\u2029', '\u0085',
  '\u00a0', '\u3000', '\0', '\u0001', 'a', 'Z', 'hello', 'World', ' the', ' of', "'s", "'S", "'LL",
  "'re", "'ve", "'d", "'", '1', '12', '123', '1234', '12345678901234567890', '3.14', '٣', '²',
  '½', '.', ',', '!?', '--', '...', '$', '_', '@', '(', ')', '{', '}', '"', '#', '<', '>', '|',
  '</', 'é', 'e\u0301', 'İ', 'ß', 'Σ', 'ΣΑΣ', 'ǅ', '日本語', '中', 'こんにちは', '한국어',
  '\u1100\u1161', 'ไทย', 'عربي', 'हिन्दी', 'Ελληνικά', 'привет', 'שלום', '👍', '👨‍👩‍👧', '🇫🇷',
  '1️⃣', '👍🏽', '\ufeff', '\u200b', '\u200d', '\ue000', '\u{e0041}', '\ufdd0', '＄', 'ｆｕｌｌ',
  'ﬁ', '™', '\u00ad', '\u0300', '\u0600', '\u{1d400}', '▁', 'Ġ', 'Ċ', '\u000b', '\u000c',
  '\u001f', '\u007f', '~', 'def f(x):\n    return x', '    ', '\t\t', 'SELECT * FROM t;',
  '<s>', '</s>', '<unk>', '<|endoftext|>', '<|endoftext|', '<|im_start|>', '<|fim_prefix|>',
  '>>TITLE<<', '<extra_id_0>', '<0x0A>', '[CLS]', '[MASK]', 'abcde', 'aaa', 'abcd', 'eé日', 'bcd',
  'ab', 'cde', 'ééé'];

function texts(addedContents) {
  const pool = atoms.concat(addedContents);
  const out = ['', ' ', '  ', '\n', 'Hello world', ' Hello world'];
  for (const a of addedContents) {
    out.push(a, ' ' + a, a + ' ', 'x' + a + 'y', a + a, ' ' + a + '\n' + a + '  z', a + '\n\n');
  }
  while (out.length < perTokenizer) {
    const n = 1 + rand(16);
    let s = '';
    for (let i = 0; i < n; i++) s += pool[rand(pool.length)];
    out.push(s);
  }
  return out;
}

function contentOf(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && typeof v.content === 'string') return v.content;
  return null;
}

async function checkFolder(folder) {
  const file = path.join(folder, 'tokenizer.json');
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const cfgFile = path.join(folder, 'tokenizer_config.json');
  const cfg = fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, 'utf8')) : {};
  const cls = String(cfg.tokenizer_class || '').replace(/Fast$/, '');
  const rebuilt = { LlamaTokenizer: true, CodeLlamaTokenizer: true, GemmaTokenizer: true };
  if ((rebuilt[cls] && cfg.add_bos_token !== false) || cfg.add_eos_token === true ||
      (cls === 'GPTNeoXTokenizer' && json.post_processor)) {
    return [`${folder}: tokenizer_class ${cls} rebuilds the post-processor; not mimicked here`];
  }
  const t = Tokenizer.fromFile(file);
  t.disableTruncation();
  t.disablePadding();
  const added = new Set((json.added_tokens || []).map((a) => a.content));
  const keys = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token',
    'mask_token'];
  for (const k of keys) {
    const c = contentOf(cfg[k]);
    if (c !== null && !added.has(c)) { t.addSpecialTokens([c]); added.add(c); }
  }
  const megatron = [];
  if (contentOf(cfg.sep_token) === null && contentOf(cfg.eos_token) !== null) {
    megatron.push(contentOf(cfg.eos_token));
  }
  if (contentOf(cfg.cls_token) === null && contentOf(cfg.bos_token) !== null) {
    megatron.push(contentOf(cfg.bos_token));
  }
  if (megatron.length) t.addSpecialTokens(megatron);

  const list = texts([...added]);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf_oracle_'));
  const input = path.join(tmp, 'texts.jsonl');
  fs.writeFileSync(input, list.map((s) => JSON.stringify({ text: s })).join('\n') + '\n');
  const run = spawnSync(tool, [folder], { input: fs.readFileSync(input), maxBuffer: 1 << 30 });
  fs.rmSync(tmp, { recursive: true, force: true });
  if (run.status !== 0) {
    return [`${folder}: ${tool} failed (${run.status}): ${run.stderr.toString()}`];
  }
  const lines = run.stdout.toString().split('\n').filter((l) => l.length);
  if (lines.length !== list.length) {
    return [`${folder}: ${lines.length} outputs for ${list.length} texts`];
  }
  const problems = [];
  for (let i = 0; i < list.length; i++) {
    const want = Array.from((await t.encode(list[i], null, { addSpecialTokens: true })).getIds());
    const got = JSON.parse(lines[i]);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      problems.push(`${folder}: text ${JSON.stringify(list[i])}: gridfeed ${JSON.stringify(got)}` +
        ` library ${JSON.stringify(want)}`);
    }
  }
  console.log(`${path.basename(folder)}: ${list.length - problems.length}/${list.length} equal`);
  return problems;
}

// Variants of the given tokenizers, and a small made-up BPE, for the options and added-token
// flags the real files leave unused; written to a temporary folder, one subfolder each.
function writeVariants(base) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'hf_variants_'));
  const put = (name, json) => {
    fs.mkdirSync(path.join(out, name));
    fs.writeFileSync(path.join(out, name, 'tokenizer.json'), JSON.stringify(json));
  };
  const load = (name) => {
    const f = path.join(base, name, 'tokenizer.json');
    return fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, 'utf8')) : null;
  };
  // Added tokens get the ids the library gives them: a vocabulary token keeps its id, others
  // follow the vocabulary.
  let next = 0;
  let vocabOf = {};
  const tok = (content, flags) => Object.assign({ id: content in vocabOf ? vocabOf[content] : next++,
    content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
  flags);
  const start = (json) => { vocabOf = json.model.vocab; next = json.added_tokens.reduce(
    (m, t) => Math.max(m, t.id + 1), Object.keys(vocabOf).length); };
  const gpt2 = load('gpt2');
  if (gpt2) {
    const a = JSON.parse(JSON.stringify(gpt2));
    a.model.ignore_merges = true;
    put('gpt2_ignore_merges', a);
    const b = JSON.parse(JSON.stringify(gpt2));
    start(b);
    b.added_tokens.push(tok('hello', { single_word: true, normalized: true }),
      tok('<|sep|>', { lstrip: true, rstrip: true, special: true }),
      tok(' World', { single_word: true }), tok('日本', { lstrip: true }),
      tok('<|sep|><|sep|>', { rstrip: true }));
    put('gpt2_added_flags', b);
  }
  const phi3 = load('phi3');
  if (phi3) {
    const a = JSON.parse(JSON.stringify(phi3));
    a.model.byte_fallback = false;
    a.model.fuse_unk = false;
    start(a);
    a.added_tokens.push(tok('<|x|>', { normalized: true }),
      tok('ab', { normalized: true, single_word: true }), tok('▁the', { normalized: true }));
    put('phi3_unk_no_fuse', a);
    const b = JSON.parse(JSON.stringify(a));
    b.model.fuse_unk = true;
    put('phi3_unk_fuse', b);
  }
  // A BPE with continuing_subword_prefix, end_of_word_suffix and unk over a small alphabet.
  const letters = 'abcdeé日'.split('');
  const vocab = { '[UNK]': 0 };
  const add = (t) => { if (!(t in vocab)) vocab[t] = Object.keys(vocab).length; };
  for (const x of letters) for (const t of [x, '##' + x, x + '</w>', '##' + x + '</w>']) add(t);
  const merges = [];
  const pairs = [['a', '##b'], ['##c', '##d'], ['ab', '##c'], ['##d', '##e</w>'], ['a', '##a'],
    ['##a', '##a'], ['aa', '##a</w>'], ['e', '##日'], ['##é', '##é'], ['b', '##c'],
    ['##b', '##c'], ['##cd', '##e</w>'], ['abc', '##d']];
  for (const [x, y] of pairs) {
    if (!(x in vocab) || !(y in vocab)) continue;
    add(x + y.slice(2));
    merges.push([x, y]);
  }
  put('bpe_prefix_suffix', { version: '1.0', truncation: null, padding: null, added_tokens: [
    { id: 0, content: '[UNK]', single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true }],
  normalizer: null, pre_tokenizer: { type: 'Split', pattern: { String: ' ' }, behavior: 'Removed',
    invert: false }, post_processor: null,
  decoder: null, model: { type: 'BPE', dropout: null, unk_token: '[UNK]',
    continuing_subword_prefix: '##', end_of_word_suffix: '</w>', fuse_unk: true,
    byte_fallback: false, ignore_merges: false, vocab, merges } });
  return out;
}

(async () => {
  const variants = writeVariants(dir);
  const folders = [dir, variants].flatMap((root) => fs.readdirSync(root)
    .map((d) => path.join(root, d))
    .filter((d) => fs.existsSync(path.join(d, 'tokenizer.json'))).sort());
  if (folders.length === 0) {
    console.error(`hf_oracle_check: no tokenizer.json under ${dir}`);
    process.exit(1);
  }
  let problems = [];
  for (const f of folders) problems = problems.concat(await checkFolder(f));
  for (const p of problems.slice(0, 20)) console.error(p);
  if (problems.length) {
    console.error(`hf_oracle_check: ${problems.length} differences`);
    process.exit(1);
  }
  fs.rmSync(variants, { recursive: true, force: true });
  console.log(`hf_oracle_check: ${folders.length} tokenizers, all equal`);
})().catch((e) => { console.error(e); process.exit(1); });
