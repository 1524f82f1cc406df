"""A golden SFT case's inputs (case.json) as gridfeed command-line flags, one per line.

Usage: sft_golden_flags.py CASE_DIR
       sft_golden_flags.py --each OUT_DIR CASE_DIR...
--each writes every case's flags and its splits' positions (items/items_index.npy)
in one start, as golden_flags.py --each does.
"""
import json
import os
import sys


def flags(case):
    i = case["inputs"]
    f = ["--sft"]
    if i.get("data_path") is not None:
        f += ["--data-path", *i["data_path"]]
    for name, paths in zip(("train", "valid", "test"), i.get("per_split_data_path") or []):
        if paths is not None:
            f += [f"--{name}-data-path", *paths]
    if i.get("split") is not None:
        f += ["--split", i["split"]]
    for name, n in zip(("train", "valid", "test"), i["sizes"]):
        f += [f"--{name}-samples", "none" if n is None else n]
    f += ["--seq-length", i["seq_length"], "--seed", i["seed"]]
    f += ["--tokenizer-model", i["tokenizer_dir"]]
    f += ["--sft-tokenizer-prompt-format", i["prompt_format"]]
    f += ["--context-parallel-size", i["context_parallel_size"]]
    if i.get("eod_mask_loss"):
        f.append("--eod-mask-loss")
    if "mid_level_dataset_surplus" in i:
        f += ["--mid-level-dataset-surplus", repr(float(i["mid_level_dataset_surplus"]))]
    return [str(x) for x in f]


if __name__ == "__main__":
    if sys.argv[1] == "--each":
        from golden_flags import write_each  # beside this script
        write_each(sys.argv[2], sys.argv[3:], flags)
        sys.exit(0)
    with open(os.path.join(sys.argv[1], "case.json")) as fh:
        print("\n".join(flags(json.load(fh))))
