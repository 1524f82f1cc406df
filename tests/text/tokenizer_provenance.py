#!/usr/bin/env python3
"""Every bundled Hugging Face tokenizer folder holds the upstream files its SOURCE.txt names:
each tokenizer.json (and any other file given a sha256 there) hashes to the recorded value.

The vocabularies are real models' (GPT-2, Phi-3, OLMo-2, BERT, T5) and must stay byte for
byte as published: the golden vectors were made with them. The models' own vocabularies under
tokenizers/ are kept as tokenizer.json.tar.xz and unpacked at configure time (unpack.cmake);
this test shows the unpacked files are the published ones, and that none is missing.

Usage: tokenizer_provenance.py GOLDEN_HF_DIR  (tests/golden/hf-tokenizers; links are followed)
"""
import hashlib
import os
import re
import sys

NAMED = re.compile(r"^(\S+):.*\bsha256 ([0-9a-f]{64})\b")   # "tokenizer.json: origin  sha256 HEX"
LISTED = re.compile(r"\b([0-9a-f]{64})\s+(\S+)\s*$")       # "sha256:  HEX  tokenizer.json"


def recorded(source_txt):
    out = {}
    with open(source_txt, encoding="utf-8") as f:
        for line in f:
            m = NAMED.match(line)
            if m:
                out[m.group(1)] = m.group(2)
                continue
            m = LISTED.search(line)
            if m:
                out[m.group(2)] = m.group(1)
    return out


def main():
    root = sys.argv[1]
    folders, failures = 0, []
    for dirpath, _, files in os.walk(root, followlinks=True):
        if "tokenizer.json.tar.xz" in files and "tokenizer.json" not in files:
            failures.append(f"{dirpath}: tokenizer.json.tar.xz not unpacked (configure with cmake)")
        if "tokenizer.json" not in files:
            continue
        folders += 1
        source = os.path.join(dirpath, "SOURCE.txt")
        if not os.path.isfile(source):
            failures.append(f"{dirpath}: tokenizer.json without SOURCE.txt")
            continue
        hashes = recorded(source)
        if "tokenizer.json" not in hashes:
            failures.append(f"{source}: no sha256 recorded for tokenizer.json")
        for name, want in sorted(hashes.items()):
            path = os.path.join(dirpath, name)
            if not os.path.isfile(path):
                failures.append(f"{path}: named in SOURCE.txt but missing")
                continue
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            if got != want:
                failures.append(f"{path}: sha256 {got}, SOURCE.txt records {want}")
    if folders == 0:
        failures.append(f"{root}: no tokenizer folder found")
    for f in failures:
        print("FAIL:", f)
    print(f"tokenizer provenance: {folders} folders, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
