#!/usr/bin/env bash
# The Python MPI tests: `gridfeed run --dump --ledger` of the shared job (job.yaml) at 1 and 8
# ranks, then pytest under mpirun at 1 rank (test_feeder.py) and 8 ranks (test_grid_mpi.py),
# which compare what Python receives with those dumps. Args: gridfeed binary, Python module dir.
set -euo pipefail
GRIDFEED=$(realpath "$1")
MODULE_DIR=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/gridfeed_pytest.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$MODULE_DIR${PYTHONPATH:+:$PYTHONPATH}" GRIDFEED_BIN="$GRIDFEED"
export GRIDFEED_CLI_DUMP="$WORK"
cd "$HERE/../golden/megatron"
RUN=(run --config "$HERE/job.yaml" --micro-batch-size 2 --train-iters 3)
mpirun -n 1 "$GRIDFEED" "${RUN[@]}" --global-batch-size 4 --dump "$WORK/dump1" \
  --ledger "$WORK/ledger1" > "$WORK/run1.out" 2>&1 || { cat "$WORK/run1.out"; exit 1; }
mpirun -n 8 --oversubscribe "$GRIDFEED" "${RUN[@]}" --global-batch-size 8 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dump "$WORK/dump8" \
  --ledger "$WORK/ledger8" > "$WORK/run8.out" 2>&1 || { cat "$WORK/run8.out"; exit 1; }
# An OLMo configuration (a golden case's training YAML), fed at 1 rank.
/usr/bin/python3 - "$HERE/../golden/olmo/cases/dataloader/u16_full_tensors/case.json" \
  "$WORK/olmo.yaml" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))["train_config"]
cfg["data"]["instance_filter"] = {}  # OLMo's "default" filter, spelled as a mapping
cfg["device_train_microbatch_size"] = cfg["device_train_batch_size"]
cfg["global_train_batch_size"] = cfg["device_train_batch_size"]  # one rank
json.dump(cfg, open(sys.argv[2], "w"), indent=1)  # JSON is YAML
PY
(cd "$HERE/../golden/olmo" && mpirun -n 1 "$GRIDFEED" run --config "$WORK/olmo.yaml" \
  --train-iters 3 --dump "$WORK/olmo_dump1" > "$WORK/olmo1.out" 2>&1) \
  || { cat "$WORK/olmo1.out"; exit 1; }
PYTEST=(/usr/bin/python3 -m pytest -p no:cacheprovider -q --color=no)
mpirun -n 1 -x PYTHONPATH -x GRIDFEED_BIN -x GRIDFEED_CLI_DUMP "${PYTEST[@]}" --basetemp="$WORK/pytest1" \
  "$HERE/test_feeder.py"
# Every rank prints its own summary; rank 0's output is shown, the others' on failure.
mpirun -n 8 --oversubscribe -x PYTHONPATH -x GRIDFEED_BIN -x GRIDFEED_CLI_DUMP \
  --output-filename "$WORK/np8" "${PYTEST[@]}" "$HERE/test_grid_mpi.py" > "$WORK/np8.out" 2>&1 \
  || { cat "$WORK/np8.out"; exit 1; }
cat "$WORK"/np8/1/rank.0/stdout
