#!/usr/bin/env bash
# The producers' projection (gridfeed bench --project-nodes; issue 49 item 3) against
# measurements on simulated nodes of 2 ranks: for N in NODES, the prediction from world rank
# 0's per-section costs in a 2-node run (--project-nodes N, cores per node = this machine's
# cores / N, since simulated nodes share them) next to a run measured at N nodes. Prints
# predicted / measured and the error of the largest node window, the largest process's peak
# memory and the start-up; asserts nothing about them (a noisy machine: read the errors).
#
# Usage: projection_check.sh GRIDFEED DATA_ARGS_PATH [NODES="1 2 4 8"] [SAMPLES=5000000]
set -euo pipefail
GF=$(realpath "${1:?gridfeed binary}")
ARGS=$(realpath "${2:?a --data-args-path file of a weighted blend}")
NODES=${3:-1 2 4 8}
SAMPLES=${4:-5000000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
T=$(mktemp -d /tmp/gridfeed_projection.XXXXXX)
trap 'rm -rf "$T"' EXIT
CORES=$(nproc)
bench() {  # bench RANKS ARGS...
  local ranks=$1
  shift
  mpirun -n "$ranks" --oversubscribe "$GF" bench --data-args-path "$ARGS" --split 100,0,0 \
    --seq-length 4096 --train-samples "$SAMPLES" --valid-samples 0 --test-samples 0 \
    --micro-batch-size 1 --train-iters 1 --samples 1000 --testing-ranks-per-node 2 --json "$@"
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $CORES cores; load before: $(head -1 /proc/pressure/cpu)"
for n in $NODES; do
  cores=$(/usr/bin/python3 -c "print($CORES / $n)")
  bench 4 --global-batch-size 4 --project-nodes "$n" --project-dp $((2 * n)) \
    --project-cores-per-node "$cores" > "$T/predicted.$n.json"
  bench $((2 * n)) --global-batch-size $((2 * n)) > "$T/measured.$n.json"
done
/usr/bin/python3 - "$T" $NODES <<'PY'
import json, sys
t, nodes = sys.argv[1], sys.argv[2:]
for n in nodes:
    p = json.load(open(f"{t}/predicted.{n}.json"))["projection"]["producers"]
    m = json.load(open(f"{t}/measured.{n}.json"))
    s, b = m["startup"], m["build"]
    rows = [("window", p["node_window_bytes"] / 1e6, s["node_window_bytes"] / 1e6, "MB"),
            ("peak", p["producer_peak_bytes"] / 1e6, b["max_producer_peak_bytes"] / 1e6, "MB"),
            ("start-up", p["seconds"], s["seconds"], "s")]
    print(f"{n} node(s), {b['producers']} producer(s): " + "; ".join(
        f"{k} {a:.1f} / {c:.1f} {u} ({a / c - 1:+.0%})" for k, a, c, u in rows))
PY
