#!/usr/bin/env bash
# Single-core encode throughput of gridfeed's Hugging Face tokenizers against Hugging Face's own
# library (its Node binding, npm package `tokenizers`, RAYON_NUM_THREADS=1), in one run, on the
# same texts, ids compared; then `gridfeed prep` with 1 and 2 workers. Prints tokens/s and the
# ratios; asserts only that the ids are identical (timings are never asserted).
#
#   tests/bench/tokenizer_speed.sh [TOKENIZER_DIR...]   (default: gpt2, olmo2-dolma2, phi3 of
#                                                       tests/golden/hf-tokenizers/tokenizers)
# Environment: GRIDFEED_BENCH_TOKENIZER_KB (corpus size, default 1024), GRIDFEED_BENCH_PASSES
# (default 3; each side reports its fastest pass), GRIDFEED_ORACLE_DIR (where node_modules/tokenizers
# is; default /work/oracle if it has it, else build/bench-node, installed there with npm if
# missing). Needs build/bin/tokenizer_speed_tool and build/bin/gridfeed.
#
# The corpus: the King James Bible (Debian's bible-kjv, one text per chapter, as scripts/demo),
# gridfeed's own C++ sources (code) and the multilingual and edge texts of the golden prep set.
# Each tokenizer.json is run alone (no tokenizer_config.json), so both sides run exactly the
# pipeline the file describes.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
kb=${GRIDFEED_BENCH_TOKENIZER_KB:-1024}
passes=${GRIDFEED_BENCH_PASSES:-3}
tool=build/bin/tokenizer_speed_tool
gridfeed=build/bin/gridfeed
for b in "$tool" "$gridfeed"; do
  [ -x "$b" ] || { echo "tokenizer_speed: $b is not built" >&2; exit 1; }
done
if ! command -v node >/dev/null; then
  echo "tokenizer_speed: node is not installed (the library's side needs it)" >&2
  exit 1
fi
oracle=${GRIDFEED_ORACLE_DIR:-}
if [ -z "$oracle" ]; then
  if [ -d /work/oracle/node_modules/tokenizers ]; then oracle=/work/oracle; else oracle=build/bench-node; fi
fi
if [ ! -d "$oracle/node_modules/tokenizers" ]; then
  if ! command -v npm >/dev/null; then
    echo "tokenizer_speed: no npm package 'tokenizers' under $oracle and no npm to install it" >&2
    exit 1
  fi
  echo "tokenizer_speed: installing the npm package tokenizers@0.23.2 into $oracle"
  npm install --silent --prefix "$oracle" tokenizers@0.23.2 >&2
fi
oracle=$(cd "$oracle" && pwd)

work=build/bench-tokenizer
rm -rf "$work"
mkdir -p "$work"
corpus=$work/corpus.jsonl
/usr/bin/python3 - "$corpus" "$kb" <<'EOF'
import glob, json, subprocess, sys
out, budget = sys.argv[1], int(sys.argv[2]) * 1024
texts = []
# Code and the golden set's mixed, multilingual and edge texts: a quarter of the budget.
code = []
for f in sorted(glob.glob("src/gridfeed/**/*.cc", recursive=True) +
                glob.glob("src/gridfeed/**/*.h", recursive=True)):
    with open(f, encoding="utf-8") as fh:
        code.append(fh.read())
golden = []
for f in sorted(glob.glob("tests/golden/hf-tokenizers/prep/texts/*.jsonl")):
    with open(f, encoding="utf-8") as fh:
        golden += [json.loads(l)["text"] for l in fh if l.strip()]
size = lambda t: len(t.encode("utf-8"))
used = 0
for t in golden:
    texts.append(t); used += size(t)
for t in code:
    if used >= budget // 4: break
    texts.append(t); used += size(t)
# Prose: KJV chapters, the rest of the budget.
try:
    kjv = subprocess.run(["scripts/kjv-jsonl"], check=True, capture_output=True, text=True).stdout
except (OSError, subprocess.CalledProcessError) as e:
    sys.exit(f"tokenizer_speed: scripts/kjv-jsonl failed ({e}); is bible-kjv installed?")
for line in kjv.splitlines():
    if used >= budget: break
    t = json.loads(line)["text"]
    texts.append(t); used += size(t)
with open(out, "w", encoding="utf-8") as fh:
    for t in texts:
        fh.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print(f"corpus: {len(texts)} texts, {used / 1024:.0f} KiB (KJV chapters, gridfeed's C++ sources, "
      "the golden set's mixed/multilingual/edge texts)")
EOF
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), single thread each side" \
     "(fastest of $passes passes)"

if [ $# -eq 0 ]; then
  set -- tests/golden/hf-tokenizers/tokenizers/{gpt2,olmo2-dolma2,phi3}
fi
status=0
printf '%-16s %14s %14s %8s\n' tokenizer "gridfeed tok/s" "library tok/s" ratio
for dir in "$@"; do
  name=$(basename "$dir")
  mkdir -p "$work/$name"
  cp "$dir/tokenizer.json" "$work/$name/tokenizer.json"
  ours=$("$tool" "$work/$name" "$corpus" "$work/$name/ids.gridfeed" "$passes")
  theirs=$(RAYON_NUM_THREADS=1 NODE_PATH="$oracle/node_modules" \
    node tests/bench/tokenizer_speed.js "$work/$name/tokenizer.json" "$corpus" \
    "$work/$name/ids.library" "$passes")
  if ! cmp -s "$work/$name/ids.gridfeed" "$work/$name/ids.library"; then
    echo "tokenizer_speed: $name: gridfeed's ids differ from the library's" \
         "(first differing text: line $(cmp "$work/$name/ids.gridfeed" "$work/$name/ids.library" \
         | sed -n 's/.* line \([0-9]*\)$/\1/p') of $corpus)" >&2
    status=1
  fi
  /usr/bin/python3 -c '
import json, sys
name, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ra, rb = a["tokens"] / a["seconds"], b["tokens"] / b["seconds"]
print(f"{name:<16} {ra:14,.0f} {rb:14,.0f} {ra / rb:7.2f}x")' "$name" "$ours" "$theirs"
done

# prep with 1 and 2 workers on the first tokenizer (one prep run each; the machine's cores and
# load bound what 2 workers can give).
first=$1
name=$(basename "$first")
for w in 1 2; do
  start=$(date +%s.%N)
  "$gridfeed" prep --input "$corpus" --output-prefix "$work/prep_w$w" \
    --tokenizer-model "$work/$name" --workers "$w" >/dev/null
  end=$(date +%s.%N)
  eval "prep_$w=\$(echo \"\$end - \$start\" | bc -l)"
done
cmp -s "$work/prep_w1.bin" "$work/prep_w2.bin" ||
  { echo "tokenizer_speed: prep --workers 2 wrote other bytes than --workers 1" >&2; status=1; }
printf 'gridfeed prep (%s, %d cores): --workers 1 %.2f s, --workers 2 %.2f s, speed-up %.2fx\n' \
  "$name" "$(nproc)" "$prep_1" "$prep_2" "$(echo "$prep_1 / $prep_2" | bc -l)"
exit $status
