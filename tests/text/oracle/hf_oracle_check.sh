#!/bin/bash
# Differential check of gridfeed's Hugging Face encoder against the real `tokenizers` library.
#   hf_oracle_check.sh HF_ENCODE_TOOL TOKENIZERS_DIR [TEXTS_PER_TOKENIZER]
# Needs node and the npm package `tokenizers` (install: npm install --prefix DIR tokenizers@0.23.2,
# then GRIDFEED_ORACLE_DIR=DIR; default /work/oracle). Fails, never skips, when either is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null; then
  echo "hf_oracle_check: node is not installed (the oracle needs it)" >&2
  exit 1
fi
oracle="${GRIDFEED_ORACLE_DIR:-/work/oracle}"
if [ ! -d "$oracle/node_modules/tokenizers" ]; then
  echo "hf_oracle_check: no npm package 'tokenizers' under $oracle/node_modules" \
       "(npm install --prefix $oracle tokenizers@0.23.2)" >&2
  exit 1
fi
NODE_PATH="$oracle/node_modules" exec node "$here/hf_oracle_check.js" "$@"
