#!/usr/bin/env bash
# A weighted blend of SFT files (the golden set has none): `gridfeed tables/samples --sft` on
# "3 A 1 B" must give Megatron's BlendedDataset, checked here against an independent
# reimplementation of its layout (numpy's pairwise-normalised weights, ceil sizes with the
# surplus, the greedy blending table) and against each file read alone (whose items the golden
# set verifies): position p equals item dataset_sample_index[p] of its file.
# Usage: sft_blend_test.sh GRIDFEED GOLDEN_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_sft_blend.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$GOLDEN"
common=(--sft --split 90,10,0 --seq-length 64 --tokenizer-model tokenizers/chat
        --sft-tokenizer-prompt-format nemotron-h-aligned)
blend=(--data-path 3 corpora/sft_a.jsonl 1.5 corpora/sft_b.jsonl
       --train-samples 37 --valid-samples 5 --test-samples 0)

"$GRIDFEED" tables "${common[@]}" "${blend[@]}" --out "$WORK/tables" > /dev/null
for split in train valid; do
  "$GRIDFEED" samples "${common[@]}" "${blend[@]}" --split-name $split --positions 0:$(
    /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['length'])" \
      "$WORK/tables/summary.json" $split) --out "$WORK/$split" > /dev/null
done
# Each file alone, as long as its mid-level dataset.
/usr/bin/python3 - "$WORK" <<'PY' > "$WORK/alone.txt"
import json, sys
s = json.load(open(sys.argv[1] + "/tables/summary.json"))
for split in ("train", "valid"):
    for k, m in enumerate(s[split]["mid"]):
        print(split, k, m["dataset_path"], m["num_samples"])
PY
while read -r split k path n; do
  sizes=(--train-samples 0 --valid-samples 0 --test-samples 0)
  [ "$split" = train ] && sizes[1]=$n || sizes[3]=$n
  "$GRIDFEED" samples "${common[@]}" --data-path "$path" "${sizes[@]}" --split-name "$split" \
    --positions 0:"$n" --out "$WORK/alone_${split}_$k" > /dev/null
done < "$WORK/alone.txt"

/usr/bin/python3 - "$WORK" <<'PY'
import json, math, sys
import numpy as np
work = sys.argv[1]
s = json.load(open(work + "/tables/summary.json"))
raw = np.array([3.0, 1.5])
w = raw / np.sum(raw)
w = w / np.sum(w)
rows = {"corpora/sft_a.jsonl": sum(1 for l in open("corpora/sft_a.jsonl") if l.strip()),
        "corpora/sft_b.jsonl": sum(1 for l in open("corpora/sft_b.jsonl") if l.strip())}
checked = total = 0
for split, size, (b, e) in (("train", 37, (0.0, 0.9)), ("valid", 5, (0.9, 1.0))):
    got = s[split]
    assert got["type"] == "BlendedDataset", got["type"]
    targets = [math.ceil(size * x) for x in w]
    assert got["length"] == sum(targets), (got["length"], targets)
    total += sum(targets)
    for k, m in enumerate(got["mid"]):
        assert m["num_samples"] == math.ceil(targets[k] * (1 + 0.005)), (m, targets)
        n = rows[m["dataset_path"]]
        assert m["row_index_range"] == [round(b * n), round(e * n)], (m, n)
    # Megatron's greedy blending table (helpers.cpp), written out independently.
    counts, index, sample = [0, 0], [], []
    for p in range(sum(targets)):
        err = [w[k] * max(p, 1.0) - counts[k] for k in range(2)]
        k = int(np.argmax(err))
        index.append(k); sample.append(counts[k]); counts[k] += 1
    di = np.load(f"{work}/tables/{split}/blend/dataset_index.npy")
    dsi = np.load(f"{work}/tables/{split}/blend/dataset_sample_index.npy")
    assert di.dtype == np.int16 and dsi.dtype == np.int64, (di.dtype, dsi.dtype)
    assert di.tolist() == index and dsi.tolist() == sample, split
    items = {f: np.load(f"{work}/{split}/{f}.npy") for f in
             ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens", "max_seqlen",
              "row_index", "dataset_id")}
    assert items["dataset_id"].dtype == np.int16 and items["dataset_id"].tolist() == index
    for k in range(2):
        alone = {f: np.load(f"{work}/alone_{split}_{k}/{f}.npy") for f in items if f != "dataset_id"}
        for p in range(len(index)):
            if index[p] != k:
                continue
            for f, a in alone.items():
                assert np.array_equal(items[f][p], a[sample[p]]), (split, p, f)
            checked += 1
assert checked == total == 44, (checked, total)  # 25 + 13 train, 4 + 2 valid
print("sft blend ok:", checked, "positions equal their file's items")
PY
