"""A golden FIM case's inputs (case.json) as gridfeed command-line flags, one per line.

Usage: fim_golden_flags.py CASE_DIR
       fim_golden_flags.py --each OUT_DIR CASE_DIR...
--each writes every case's flags and its splits' positions (items/fetch_order.npy)
in one start, as golden_flags.py --each does.
"""
import json
import os
import sys


def flags(case):
    i = case["inputs"]
    f = ["--fim-data"]
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
    if i.get("special_tokens_arg"):
        f += ["--special-tokens", *i["special_tokens_arg"]]
    f += ["--fim-rate", repr(float(i["fim_rate"])), "--fim-spm-rate", repr(float(i["fim_spm_rate"]))]
    if i.get("fim_split_sample") is not None:
        f += ["--fim-split-sample", i["fim_split_sample"]]
    if i.get("fim_fragment_rate") is not None:
        f += ["--fim-fragment-rate", repr(float(i["fim_fragment_rate"]))]
    if i.get("fim_no_prefix") is not None:
        f += ["--fim-no-prefix", i["fim_no_prefix"]]
    for part, name in (i.get("fim_extra_tokens") or {}).items():
        f += [f"--fim-{part}-token", name]
    for key, flag in (("reset_position_ids", "--reset-position-ids"),
                      ("reset_attention_mask", "--reset-attention-mask"),
                      ("eod_mask_loss", "--eod-mask-loss"),
                      ("create_attention_mask", "--create-attention-mask"),
                      ("inter_document_masking", "--dataloader-inter-document-masking")):
        if i.get(key):
            f.append(flag)
    if i.get("add_extra_token_to_sequence") is False:
        f.append("--no-add-extra-token")
    if "mid_level_dataset_surplus" in i:
        f += ["--mid-level-dataset-surplus", repr(float(i["mid_level_dataset_surplus"]))]
    return [str(x) for x in f]


if __name__ == "__main__":
    if sys.argv[1] == "--each":
        from golden_flags import write_each  # beside this script
        write_each(sys.argv[2], sys.argv[3:], flags, "fetch_order.npy")
        sys.exit(0)
    with open(os.path.join(sys.argv[1], "case.json")) as fh:
        print("\n".join(flags(json.load(fh))))
