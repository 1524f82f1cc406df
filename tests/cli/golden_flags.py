"""A golden Megatron case's inputs (case.json) as gridfeed command-line flags, one per line.

Usage: golden_flags.py CASE_DIR [--batches | --yaml]
       golden_flags.py --each OUT_DIR CASE_DIR... [--batches]
--batches adds the micro-batch size of the case's DataLoader micro-batches; --yaml prints the
flags but --seed as a gridfeed YAML configuration instead (the seed stays a flag).
--each does many cases in one start (a Python with numpy per case was most of a golden test's
time): for every CASE_DIR it writes OUT_DIR/NAME.flags (its flags, one per line) and, for each
split with items/items_index.npy, OUT_DIR/NAME.SPLIT.positions (those positions on one line,
comma-separated, as --positions takes them). sft_golden_flags.py and fim_golden_flags.py take
--each too (write_each below).
"""
import json
import os
import sys


def flags(case, batches=False):
    i = case["inputs"]
    f = []
    if i["data_path"] is not None:
        f += ["--data-path", *i["data_path"]]
    for name, paths in zip(("train", "valid", "test"), i["per_split_data_path"] or []):
        if paths is not None:
            f += [f"--{name}-data-path", *paths]
    if i["split"] is not None:
        f += ["--split", i["split"]]
    for name, n in zip(("train", "valid", "test"), i["sizes"]):
        f += [f"--{name}-samples", "none" if n is None else n]
    f += ["--seq-length", i["seq_length"], "--seed", i["seed"]]
    tok = i["tokenizer"]
    f += ["--vocab-size", tok["vocab_size"], "--eod-id", tok["eod_id"]]
    if tok.get("pad_id") is not None:
        f += ["--pad-id", tok["pad_id"]]
    for key in ("reset_position_ids", "reset_attention_mask", "eod_mask_loss",
                "create_attention_mask"):
        if i[key]:
            f.append("--" + key.replace("_", "-"))
    if not i["add_extra_token_to_sequence"]:
        f.append("--no-add-extra-token")
    if not i["drop_last_partial_validation_sequence"]:
        f.append("--no-drop-last-partial-validation-sequence")
    f += ["--mid-level-dataset-surplus", repr(float(i["mid_level_dataset_surplus"]))]
    if batches:
        f += ["--micro-batch-size", case["batches"]["mbs"]]
    return [str(x) for x in f]


def write_each(out_dir, case_dirs, flags_of, index="items_index.npy"):
    """Each case's flags_of(case.json) and its splits' positions (items/INDEX) in out_dir."""
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)
    for case_dir in case_dirs:
        name = os.path.basename(os.path.normpath(case_dir))
        with open(os.path.join(case_dir, "case.json")) as fh:
            f = flags_of(json.load(fh))
        with open(os.path.join(out_dir, name + ".flags"), "w") as fh:
            fh.write("".join(x + "\n" for x in f))
        for split in ("train", "valid", "test"):
            path = os.path.join(case_dir, split, "items", index)
            if os.path.isfile(path):
                with open(os.path.join(out_dir, f"{name}.{split}.positions"), "w") as fh:
                    fh.write(",".join(map(str, np.load(path))) + "\n")


def yaml(f):
    """Flags as YAML: `key: value`, a list for several values, true for a bare flag."""
    out, i = [], 0
    while i < len(f):
        key, i = f[i][2:], i + 1
        values = []
        while i < len(f) and not f[i].startswith("--"):
            values.append(f[i])
            i += 1
        if key == "seed":
            continue
        if not values:
            out.append(f"{key}: true")
        elif key.endswith("data-path"):
            quoted = ", ".join('"' + v + '"' for v in values)
            out.append(f"{key}: [{quoted}]")
        else:
            out.append(f'{key}: "{values[0]}"' if "," in values[0] else f"{key}: {values[0]}")
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--each":
        batches = "--batches" in sys.argv[3:]
        write_each(sys.argv[2], [a for a in sys.argv[3:] if a != "--batches"],
                   lambda case: flags(case, batches))
        sys.exit(0)
    with open(os.path.join(sys.argv[1], "case.json")) as fh:
        f = flags(json.load(fh), "--batches" in sys.argv[2:])
    print("\n".join(yaml(f) if "--yaml" in sys.argv[2:] else f))
