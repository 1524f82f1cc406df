#!/usr/bin/env bash
# --dataloader-type (Megatron's flag) arrives through the option table and works everywhere:
# `run --dataloader-type cyclic` hands each DP rank exactly what Megatron's
# MegatronPretrainingRandomSampler gives it (golden vectors, with and without data sharding,
# across epochs), `audit replay` reproduces it from the ledger, `audit verify` accepts the
# ledger, a resume that changes DP under cyclic is refused, and the toy trainer trains on it.
#   dataloader_type_test.sh GRIDFEED GOLDEN_DIR [TOY_TRAINER]
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
TRAINER=${3:+$(realpath "$3")}
WORK=$(mktemp -d /tmp/gridfeed_dltype.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
# A weighted one-source blend is exactly --train-samples long: 100 samples, as in the golden
# sampler cases random_00 (sharding) and random_01 (no sharding), MBS 4 x DP 2.
F=(--data-path 1.0 corpora/corpus_u16 --split 100,0,0 --seq-length 64 --train-samples 100
   --micro-batch-size 4 --dataloader-type cyclic --train-iters 30)

check_golden() {  # dump golden_case
  /usr/bin/python3 - "$1" "$GOLDEN/samplers/$2" <<'PY'
import json, sys
import numpy as np
dump, golden = sys.argv[1], sys.argv[2]
for r in range(2):
    got = np.load(f"{dump}/rank{r}/sample_indices.npy").reshape(-1)
    want = np.load(f"{golden}/rank{r}_flat.npy")
    assert len(got) == 120 and len(want) >= 120, (len(got), len(want))
    assert np.array_equal(got, want[:120]), (r, got[:12], want[:12])
PY
}

# 1. Data sharding (Megatron's default): 30 iterations = 2.5 epochs.
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${F[@]}" --dump "$WORK/dump" --ledger "$WORK/ledger" \
  --save "$WORK/ck.h5" > "$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "cyclic run"; }
check_golden "$WORK/dump" random_00 || fail "cyclic positions differ from Megatron's sampler"

# 2. Without data sharding.
mpirun -n 2 --oversubscribe "$GRIDFEED" run "${F[@]}" --no-data-sharding --dump "$WORK/dump2" \
  > "$WORK/run2.out" 2>&1 || { cat "$WORK/run2.out"; fail "cyclic run without sharding"; }
check_golden "$WORK/dump2" random_01 || fail "unsharded cyclic positions differ"

# 3. The audit reads the same schedule from the ledger alone (plus the run's batch geometry).
"$GRIDFEED" audit verify --ledger "$WORK/ledger" > "$WORK/verify.out" 2>&1 \
  || { cat "$WORK/verify.out"; fail "verify of a cyclic ledger"; }
grep -q "cyclic order" "$WORK/verify.out" || fail "verify did not say what it proved"
"$GRIDFEED" audit replay --ledger "$WORK/ledger" --data-parallel-size 2 --micro-batch-size 4 \
  --steps 0:30 --out "$WORK/replay" > /dev/null 2>&1 || fail "replay"
/usr/bin/python3 - "$WORK" <<'PY'
import sys
import numpy as np
w = sys.argv[1]
for r in range(2):
    a = np.load(f"{w}/dump/rank{r}/sample_indices.npy")
    b = np.load(f"{w}/replay/dp_rank{r}/sample_indices.npy")
    assert np.array_equal(a, b), r
PY
# An endless (cyclic) replay range is refused before any work, naming --steps.
if timeout -k 5 60 "$GRIDFEED" audit replay --ledger "$WORK/ledger" --steps 0:1000000000000 \
    > "$WORK/huge.out" 2>&1; then
  fail "a huge cyclic replay range was accepted"
fi
grep -q -- "--steps" "$WORK/huge.out" || { cat "$WORK/huge.out"; fail "huge range not named"; }
# The ledger records what the replay recomputes, line for line.
for r in 0 1; do
  diff <(grep -v '^#' "$WORK/ledger/dp$r.tsv") "$WORK/replay/dp_rank$r/records.tsv" \
    || fail "ledger dp$r differs from the replay"
done

# 4. Under cyclic the order depends on DP: a resume at another DP is refused, by name.
if mpirun -n 1 "$GRIDFEED" run "${F[@]}" --train-iters 40 --resume "$WORK/ck.h5" \
    > "$WORK/resume.out" 2>&1; then
  fail "a DP change under cyclic resumed"
fi
grep -q "dataloader-type cyclic" "$WORK/resume.out" || { cat "$WORK/resume.out"; fail "message"; }

# 5. A YAML config selects it too, and a bad value names the flag.
printf 'dataloader-type: cyclic\n' > "$WORK/c.yaml"
if "$GRIDFEED" samples --config "$WORK/c.yaml" --dataloader-type shuffled --data-path \
    corpora/corpus_u16 --seq-length 64 --positions 0 --out "$WORK/s" > "$WORK/bad.out" 2>&1; then
  fail "a bad --dataloader-type was accepted"
fi
grep -q -- "--dataloader-type" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "bad value message"; }

# 6. The toy trainer takes the same flag from the same table.
if [ -n "$TRAINER" ]; then
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  mpirun -n 2 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$TRAINER" \
    --config "$WORK/c.yaml" --data-path 1.0 corpora/corpus_u16 --split 100,0,0 --seq-length 32 \
    --train-samples 100 --vocab-size 65536 --micro-batch-size 4 --train-iters 14 --d-model 32 \
    --layers 1 \
    --ledger "$WORK/tledger" > "$WORK/trainer.out" 2>&1 || { cat "$WORK/trainer.out"; fail "trainer"; }
  "$GRIDFEED" audit verify --ledger "$WORK/tledger" > "$WORK/tverify.out" 2>&1 \
    || { cat "$WORK/tverify.out"; fail "verify of the trainer's cyclic ledger"; }
  grep -q '"sampler":"cyclic"' "$WORK/tledger/dp0.tsv" || fail "the trainer's ledger is not cyclic"
  # The trainer's `latest` cannot be published (a folder is in the way): a clear error on every
  # rank, the job ends, nothing half-written hides the checkpoint.
  mkdir -p "$WORK/tsave/latest"
  set +e
  timeout -k 5 120 mpirun -n 2 --oversubscribe -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
    "$TRAINER" --config "$WORK/c.yaml" --data-path 1.0 corpora/corpus_u16 --split 100,0,0 \
    --seq-length 32 --train-samples 100 --vocab-size 65536 --micro-batch-size 4 --train-iters 2 \
    --d-model 32 --layers 1 --save "$WORK/tsave" > "$WORK/tsave.out" 2>&1
  rc=$?
  set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/tsave.out"; fail "latest: rc $rc"; }
  grep -q "latest" "$WORK/tsave.out" || { cat "$WORK/tsave.out"; fail "latest: not named"; }
  [ -z "$(find "$WORK/tsave" -name '*.tmp*')" ] || fail "latest: a temporary was left"
fi
echo "dataloader-type: ok"
