#!/usr/bin/env bash
# The toy trainer fed by gridfeed under mpirun: the loss goes down; a run killed with SIGKILL
# after its checkpoint at step K and resumed to 2K has bitwise the same losses for K+1..2K and
# the same final parameters as an uninterrupted 2K run, at TP2 x PP2 x CP1 x DP2 and
# TP1 x PP2 x CP2 x DP2; resuming at another DP size continues the global sample sequence; on a
# mixture schedule (with a final long-context stage) the loss log carries each source's loss and
# samples per step, whose counts are the ledger's and whose sample-weighted mean is the step's
# loss, and audit verify proves the ledger.
set -euo pipefail
TRAINER=$(realpath "$1")
ROOT=$(realpath "$2")
GRIDFEED=$(realpath "$3")
WORK=$(mktemp -d /tmp/gridfeed_trainer.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
# Real text: the bundled KJV corpus (a SentencePiece vocabulary of 8000, EOS 2).
"$ROOT/scripts/prepare-kjv" "$WORK/kjv" > /dev/null
cd "$WORK"
DATA=(--data-path kjv/kjv_text_document --split 98,2,0 --seq-length 64 --train-samples 20000
      --valid-samples 100 --test-samples none --vocab-size 8000 --eod-id 2 --micro-batch-size 4
      --global-batch-size 16 --d-model 64 --lr 3e-3)
train() { mpirun -n 8 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$TRAINER" \
            "${DATA[@]}" "$@"; }

check_layout() {  # name, K, grid flags...
  local name=$1 k=$2; shift 2
  local d="$WORK/$name" n=$((2 * k))
  mkdir -p "$d"
  train "$@" --train-iters "$n" --loss-log "$d/full.tsv" > "$d/full.out" 2>&1 \
    || { cat "$d/full.out"; fail "$name: uninterrupted run"; }
  set +e
  train "$@" --train-iters "$n" --save "$d/ckpt" --save-interval "$k" \
    --testing-kill-after-step "$k" --loss-log "$d/cut.tsv" > "$d/kill.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "$name: the killed run exited 0"
  [ "$(cat "$d/ckpt/latest")" = "step$k" ] || fail "$name: no checkpoint at step $k"
  train "$@" --train-iters "$n" --load "$d/ckpt" --loss-log "$d/resumed.tsv" > "$d/resume.out" 2>&1 \
    || { cat "$d/resume.out"; fail "$name: resume"; }
  # Steps K+1..2K and the final parameters, bit for bit (%.17g losses, parameter hashes).
  # (sorted: the stages append their parameter lines in no fixed order)
  cmp <(awk -F'\t' -v k="$k" '$1 ~ /^params/ || $1 > k' "$d/full.tsv" | sort) \
      <(awk -F'\t' -v k="$k" '$1 ~ /^params/ || $1 > k' "$d/resumed.tsv" | sort) \
    || fail "$name: resumed losses or parameters differ from the uninterrupted run"
  echo "$name: kill at step $k + resume == uninterrupted run, bitwise"
}

check_layout tp2pp2dp2 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
first=$(awk -F'\t' '$1 == 1 {print $2}' "$WORK/tp2pp2dp2/full.tsv")
last=$(awk -F'\t' '$1 == 16 {print $2}' "$WORK/tp2pp2dp2/full.tsv")
/usr/bin/python3 -c "import sys; f,l=float(sys.argv[1]),float(sys.argv[2]); \
assert l < 0.75 * f, (f, l); print(f'loss {f:.3f} -> {l:.3f} after 16 steps')" "$first" "$last"
check_layout tp1pp2cp2dp2 3 --pipeline-model-parallel-size 2 --context-parallel-size 2

# Resume the TP2xPP2xDP2 checkpoint at DP 4 (TP1xPP2): same global batch, same sample sequence.
d="$WORK/dp"
mkdir -p "$d"
train --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 8 \
  --ledger "$d/full" > "$d/full.out" 2>&1 || fail "ledger run"
train --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 4 \
  --save "$d/ckpt" --ledger "$d/cut" > "$d/first.out" 2>&1 || fail "first half"
train --pipeline-model-parallel-size 2 --train-iters 8 --load "$d/ckpt" --ledger "$d/cut" \
  --loss-log "$d/dp4.tsv" > "$d/dp4.out" 2>&1 || { cat "$d/dp4.out"; fail "resume at DP 4"; }
/usr/bin/python3 - "$d" <<'PY'
import glob, sys
d = sys.argv[1]
def positions(folder):
    out = {}
    for f in glob.glob(f"{folder}/dp*.tsv"):
        for line in open(f):
            if line.startswith("#") or line.startswith("iteration"):
                continue
            it, _, _, pos = line.split("\t")[:4]
            out.setdefault(int(it), set()).add(int(pos))
    return out
full, cut = positions(f"{d}/full"), positions(f"{d}/cut")
assert full == cut, "the DP-4 resume read other samples than the uninterrupted run"
losses = [float(l.split("\t")[1]) for l in open(f"{d}/dp4.tsv") if not l.startswith("params")]
assert len(losses) == 4 and all(x == x for x in losses), losses
print("resume at DP 4: same global sample sequence, trained on:", ", ".join(f"{x:.3f}" for x in losses))
PY

# Per-source loss on a mixture with a ramp and a final long-context stage of 128-token samples
# (the KJV store and a copy of it as two sources; the last pipeline stage, which computes the
# loss, gets the source ids; every stage sizes its activations by the micro-batch's length).
d="$WORK/mix"
mkdir -p "$d" "$WORK/kjv2"
cp "$WORK"/kjv/kjv_text_document.{bin,idx} "$WORK/kjv2/"
cat > "$d/mix.yaml" <<YAML
seq-length: 64
split: "98,2,0"
vocab-size: 8000
eod-id: 2
sources: {law: $WORK/kjv/kjv_text_document, prophets: $WORK/kjv2/kjv_text_document}
schedule:
  - {name: main, samples: 48, mixture: {law: 0.75, prophets: 0.25}}
  - {name: anneal, samples: 48, mixture: {law: 0.25, prophets: 0.75}, ramp_samples: 16}
  - {name: long, samples: 32, seq_length: 128, mixture: {law: 0.5, prophets: 0.5}}
YAML
mpirun -n 8 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$TRAINER" \
  --config "$d/mix.yaml" --micro-batch-size 4 --global-batch-size 16 --d-model 64 --lr 3e-3 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 8 \
  --ledger "$d/ledger" --loss-log "$d/loss.tsv" > "$d/train.out" 2>&1 \
  || { cat "$d/train.out"; fail "mixture run"; }
grep -q "law .* prophets " "$d/train.out" || { cat "$d/train.out"; fail "no per-source loss shown"; }
/usr/bin/python3 - "$d" <<'PY' || fail "per-source loss log"
import glob, math, sys
d = sys.argv[1]
ledger = {}  # iteration -> samples per source, from the ledger's records
for f in glob.glob(f"{d}/ledger/dp*.tsv"):
    for line in open(f):
        if line.startswith("#") or line.startswith("iteration"):
            continue
        cols = line.split("\t")
        c = ledger.setdefault(int(cols[0]), [0, 0])
        c[int(cols[4])] += 1
rows = [l.rstrip("\n").split("\t") for l in open(f"{d}/loss.tsv") if l[0].isdigit()]
assert len(rows) == 8, rows
for r in rows:
    step, total, kv = int(r[0]), float(r[1]), dict(c.split("=") for c in r[2:])
    assert set(kv) == {"law", "law_samples", "prophets", "prophets_samples"}, kv
    n = [int(kv["law_samples"]), int(kv["prophets_samples"])]
    assert n == ledger[step - 1], (step, n, ledger[step - 1])
    losses = [float(kv["law"]), float(kv["prophets"])]
    mean = sum(l * k for l, k in zip(losses, n) if k) / sum(n)
    assert math.isclose(mean, total, rel_tol=1e-4), (step, losses, n, total)
print("per-source loss: counts equal the ledger's, weighted mean equals the loss at every step")
PY
"$GRIDFEED" audit verify --ledger "$d/ledger" > "$d/verify.out" 2>&1 \
  || { cat "$d/verify.out"; fail "audit verify of the mixture with a long-context stage"; }
# An OLMo YAML without device_train_microbatch_size (OLMo's 16 > the device batch of 8): the
# trainer takes the micro-batch size the feeder resolved, not the option's 16.
d="$WORK/olmo"
mkdir -p "$d"
cat > "$d/olmo.yaml" <<'YAML'
seed: 7
global_train_batch_size: 16
model: {max_sequence_length: 64, eos_token_id: 2, pad_token_id: 0}
data: {paths: [kjv/kjv_text_document.bin], memmap_dtype: uint16, drop_last: true}
YAML
mpirun -n 2 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$TRAINER" \
  --config "$d/olmo.yaml" --vocab-size 8000 --d-model 32 --train-iters 2 > "$d/train.out" 2>&1 \
  || { cat "$d/train.out"; fail "toy trainer on an OLMo YAML without a micro-batch size"; }
grep -q "^step 2 loss" "$d/train.out" || { cat "$d/train.out"; fail "OLMo run: no step 2"; }
echo "toy trainer: ok"
