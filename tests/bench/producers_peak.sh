#!/usr/bin/env bash
# Many table producers (issue 49 item 2): `gridfeed bench --json` on a blend at NODES simulated
# nodes of 2 ranks, built by world rank 0 alone (--table-producers 1) and by every node's
# leader (auto), alternated REPS times in one run. Prints each run's largest process peak
# memory, start-up and image digest, and the ratio of the peaks to the 1/4 the issue asks for.
# Asserts only that the digests agree (the images are the same); time and memory are printed.
#
# Usage: producers_peak.sh GRIDFEED DATA_ARGS_PATH [NODES=8] [REPS=1] [SAMPLES=5000000]
set -euo pipefail
GF=$(realpath "${1:?gridfeed binary}")
ARGS=$(realpath "${2:?a --data-args-path file of a weighted blend}")
NODES=${3:-8}
REPS=${4:-1}
SAMPLES=${5:-5000000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
T=$(mktemp -d /tmp/gridfeed_producers_peak.XXXXXX)
trap 'rm -rf "$T"' EXIT
RANKS=$((2 * NODES))
for rep in $(seq "$REPS"); do
  for p in 1 auto; do
    mpirun -n "$RANKS" --oversubscribe "$GF" bench --data-args-path "$ARGS" --split 100,0,0 \
      --seq-length 4096 --train-samples "$SAMPLES" --valid-samples 0 --test-samples 0 \
      --micro-batch-size 1 --global-batch-size "$RANKS" --train-iters 1 --samples 1000 \
      --testing-ranks-per-node 2 --table-producers "$p" --json > "$T/$p.$rep.json"
  done
done
/usr/bin/python3 - "$T" "$REPS" "$NODES" <<'PY'
import json, sys
t, reps, nodes = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for rep in range(1, reps + 1):
    one, many = (json.load(open(f"{t}/{p}.{rep}.json")) for p in ("1", "auto"))
    b1, bn = one["build"], many["build"]
    assert b1["image_digest"] == bn["image_digest"], (b1, bn)
    ratio = bn["max_producer_peak_bytes"] / b1["max_producer_peak_bytes"]
    print(f"{nodes} simulated nodes of 2 ranks, pass {rep}: one producer peak "
          f"{b1['max_producer_peak_bytes'] / 1e6:.1f} MB (start-up {one['startup']['seconds']:.2f} s), "
          f"{bn['producers']} producers peak {bn['max_producer_peak_bytes'] / 1e6:.1f} MB "
          f"(start-up {many['startup']['seconds']:.2f} s); ratio {ratio:.3f} (goal <= 0.25: "
          f"{ratio / 0.25:.2f}x the bound); image digest {bn['image_digest']} both ways; node "
          f"window {many['startup']['node_window_bytes'] / 1e6:.1f} MB of a "
          f"{bn['image_bytes'] / 1e6:.1f} MB image")
PY
