"""A small TikTokenizer vocabulary for tests/text/tiktoken_tokenizer_test.cc.

Trains byte-level merges on the golden set's texts and writes them in the format Megatron's
TikTokenizer reads (reload_mergeable_ranks): a JSON list of {"rank", "token_bytes" (base64),
"token_str"}, ranks 0..255 the single bytes. The vocabulary is input data, not an expected
value: the expected ids come from tiktoken_cases.js (the real tiktoken).
  python3 tests/text/oracle/make_tiktoken_vocab.py > tests/text/data/tiktoken_vocab.json
"""
import base64
import collections
import json
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
MERGES = 1500

texts = []
for name in ("long", "mixed", "edge"):
    with open(os.path.join(ROOT, "tests/golden/hf-tokenizers/prep/texts", name + ".jsonl")) as f:
        texts += [json.loads(line)["text"] for line in f if line.strip()]
words = collections.Counter()
for t in texts:
    for w in re.findall(r" ?\w+| ?[^\w\s]+|\s+", t):
        words[tuple(bytes([b]) for b in w.encode("utf-8"))] += 1

ranks = [bytes([i]) for i in range(256)]
known = set(ranks)
for _ in range(MERGES):
    pairs = collections.Counter()
    for w, n in words.items():
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += n
    if not pairs:
        break
    (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
    merged = a + b
    if merged not in known:
        known.add(merged)
        ranks.append(merged)
    new_words = collections.Counter()
    for w, n in words.items():
        out, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                out.append(merged)
                i += 2
            else:
                out.append(w[i])
                i += 1
        new_words[tuple(out)] += n
    words = new_words

json.dump(
    [
        {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": t.decode("utf-8", "replace")}
        for i, t in enumerate(ranks)
    ],
    os.sys.stdout,
    ensure_ascii=False,
)
