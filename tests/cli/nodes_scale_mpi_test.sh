#!/usr/bin/env bash
# Simulated scale on one machine: 16 ranks as 8 simulated nodes of 2 ranks each
# (--testing-ranks-per-node 2), each node with its own shared window and leader, against the
# same 16 ranks on the real (one) node. Checks, for TP 2 x PP 2 x DP 4 (one reader on every
# node) and DP 16 (two readers on every node): run reports 8 windows with the expected readers
# and the dumps of all 16 ranks are byte-identical to the real node's; a dump of other data
# (consumed samples 12 instead of 8) does differ, so the comparison can fail; a corrupted image
# on the last node's leader, a node image rank 0 fails to make and a leader's failed receive are
# each the same error on all 16 ranks; rank 0's failed send ends the job; `bench --json` at 8 nodes
# reports 8 nodes and node windows of at most a quarter of the image at DP 16 (the whole image
# with --node-window full); node windows on 1 and 16 nodes read what the whole image reads.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_scale.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
BASE=(--data-path corpora/corpus_u16 --split 969,30,1 --seq-length 64 --seed 1234
      --train-samples 3000 --valid-samples 120 --test-samples 30 --micro-batch-size 4)
fail() { echo "FAIL: $*" >&2; exit 1; }
run16() {  # run16 NAME ARGS...: gridfeed run on 16 ranks, output in $WORK/NAME.out
  local name=$1
  shift
  timeout 120 mpirun -n 16 --oversubscribe "$GRIDFEED" run "${BASE[@]}" "$@" \
    > "$WORK/$name.out" 2>&1
}
windows() {  # windows NAME COUNT READERS: run's window line
  grep -q "^table windows: $2 (.*readers per node: $3)$" "$WORK/$1.out" ||
    { cat "$WORK/$1.out"; fail "$1: expected $2 windows (readers per node: $3)"; }
}

# 1. Two grids, real node vs 8 simulated nodes of 2 ranks. Megatron's rank order (TP fastest,
#    then DP, then PP): at TP 2 x PP 2 x DP 4 the readers (tp 0 of both stages) are the even
#    world ranks, one on each simulated node {2k, 2k+1}; at DP 16 every rank reads.
#    name | grid flags | readers on the real node | readers per simulated node
for case in "tp2pp2dp4|--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2|8|1" \
            "dp16||16|2"; do
  IFS='|' read -r name grid real per <<< "$case"
  read -r -a GRID <<< "$grid"
  FLAGS=("${GRID[@]}" --global-batch-size 16 --train-iters 2 --consumed-samples 8)
  [ "$name" = dp16 ] && FLAGS=(--global-batch-size 64 --train-iters 2 --consumed-samples 64)
  run16 "$name.real" "${FLAGS[@]}" --dump "$WORK/$name.real" ||
    { cat "$WORK/$name.real.out"; fail "$name: real-node run failed"; }
  windows "$name.real" 1 "$real"
  run16 "$name.sim" "${FLAGS[@]}" --testing-ranks-per-node 2 --dump "$WORK/$name.sim" ||
    { cat "$WORK/$name.sim.out"; fail "$name: 8 simulated nodes: run failed"; }
  windows "$name.sim" 8 "$(printf "$per %.0s" 1 2 3 4 5 6 7 8 | sed 's/ $//')"
  grep -q "checks: .* ok" "$WORK/$name.sim.out" || fail "$name: no checks line"
  [ "$(ls "$WORK/$name.real" | wc -l)" -eq 16 ] || fail "$name: expected 16 rank dumps"
  diff -r "$WORK/$name.real" "$WORK/$name.sim" > "$WORK/$name.diff" ||
    { head "$WORK/$name.diff"; fail "$name: dump at 8 simulated nodes differs from the real node"; }
  echo "$name: 8 simulated nodes x 2 ranks, 8 windows, 16 dumps identical to the real node"
done

# 2. The comparison can fail: other data (TP 2 x PP 2 x DP 4 from consumed samples 12) at
#    8 simulated nodes must differ from the real node's dump of consumed samples 8.
run16 other --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --global-batch-size 16 --train-iters 2 --consumed-samples 12 --testing-ranks-per-node 2 \
  --dump "$WORK/other" || { cat "$WORK/other.out"; fail "other data: run failed"; }
! diff -rq "$WORK/tp2pp2dp4.real" "$WORK/other" > /dev/null ||
  fail "a dump of other samples compared equal: the comparison cannot fail"
echo "other samples: dump differs, as it must"

# 3. A corrupted image on the last simulated node (node 7, leader world rank 14): the same
#    digest error on every one of the 16 ranks, the job ends non-zero, no hang.
start=$(date +%s)
set +e
run16 corrupt --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --global-batch-size 16 --train-iters 2 --testing-ranks-per-node 2 --testing-corrupt-image-node 7
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || { cat "$WORK/corrupt.out"; fail "corrupted image on node 7 accepted"; }
[ "$rc" -ne 124 ] || { cat "$WORK/corrupt.out"; fail "corrupted image on node 7: job hung"; }
want="rank 14: image digest mismatch after the broadcast on node 7 "
n=$(grep -c "^gridfeed run: error (rank [0-9]*): .*$want" "$WORK/corrupt.out" || true)
[ "$n" -eq 16 ] || { cat "$WORK/corrupt.out"; fail "expected '$want' on 16 ranks, got $n"; }
echo "corrupted image on node 7 of 8: same error on 16 ranks, status $rc after ${elapsed}s"

# 3b. World rank 0 fails to make one node's window image (node windows: the first node, rank 0's
#     own, and a later one, while it works node by node): the same error on every one of the 16
#     ranks, the job ends non-zero, no hang.
for node in 0 5; do
  set +e
  run16 "failnode$node" --global-batch-size 64 --train-iters 2 --testing-ranks-per-node 2 \
    --testing-fail-node-image "$node"
  rc=$?
  set -e
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/failnode$node.out"; fail "node $node: rc $rc"; }
  want="cannot make node $node's image (injected by test)"
  n=$(grep -c "^gridfeed run: error (rank [0-9]*): .*$want" "$WORK/failnode$node.out" || true)
  [ "$n" -eq 16 ] || { cat "$WORK/failnode$node.out"; fail "expected '$want' on 16 ranks, got $n"; }
done
echo "node image not made (node 0, node 5 of 8): same error on 16 ranks, no hang"

# 3c. A node leader's receive of its window size fails (node 3, leader world rank 6) while world
#     rank 0 waits for the node's answer: the leader still answers, the job ends non-zero with
#     the leader's error on every one of the 16 ranks, no hang.
set +e
run16 failrecv --global-batch-size 64 --train-iters 2 --testing-ranks-per-node 2 \
  --testing-fail-node-receive 3
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/failrecv.out"; fail "failed receive: rc $rc"; }
want="rank 6: cannot receive this node's image size (injected by test)"
n=$(grep -c "^gridfeed run: error (rank [0-9]*): .*$want" "$WORK/failrecv.out" || true)
[ "$n" -eq 16 ] || { cat "$WORK/failrecv.out"; fail "expected '$want' on 16 ranks, got $n"; }
! grep -q "rank 6: rank 6:" "$WORK/failrecv.out" ||
  { cat "$WORK/failrecv.out"; fail "the agreed error names its rank twice"; }
echo "node 3's leader failed to receive its size: same error on 16 ranks, no hang"

# 3d. World rank 0's send of node 5's image fails after the leader said it is ready: the leader
#     would wait for bytes that never come, so the job ends (MPI_Abort) with rank 0's reason,
#     no hang. Node 0 is rank 0's own: failing it is refused.
set +e
run16 failsend --global-batch-size 64 --train-iters 2 --testing-ranks-per-node 2 \
  --testing-fail-node-send 5
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/failsend.out"; fail "failed send: rc $rc"; }
want="exchange with node 5's leader: Aborted: cannot send the image (injected by test); ending the job (MPI_Abort)"
grep -q "rank 0/16\] .*$want" "$WORK/failsend.out" || { cat "$WORK/failsend.out"; fail "expected '$want'"; }
set +e
run16 failsend0 --testing-ranks-per-node 2 --testing-fail-node-send 0
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q -- "--testing-fail-node-send must be in \[1, world size) or -1" \
  "$WORK/failsend0.out" || { cat "$WORK/failsend0.out"; fail "node 0 accepted: rc $rc"; }
echo "rank 0's failed send to node 5 ended the job with its reason, no hang; node 0 refused"

# 4. bench --json at 8 simulated nodes (DP 16): 8 nodes; by default (--node-window auto: node
#    windows on several nodes) the largest node window holds at most a quarter of the image
#    (each node's two DP ranks read an eighth of the samples); with --node-window full it is
#    the whole image.
for mode in auto full; do
  timeout 120 mpirun -n 16 --oversubscribe "$GRIDFEED" bench "${BASE[@]}" --samples 100 \
    --testing-ranks-per-node 2 --node-window "$mode" --json > "$WORK/bench.$mode.json" \
    2> "$WORK/bench.err" || { cat "$WORK/bench.err"; fail "bench at 8 simulated nodes failed"; }
done
/usr/bin/python3 - "$WORK/bench.auto.json" "$WORK/bench.full.json" <<'PY' ||
import json, sys
r, f = (json.load(open(p)) for p in sys.argv[1:3])
s, b = r["startup"], r["build"]
assert r["ranks"] == 16 and s["nodes"] == 8, (r, s)
assert 0 < s["node_window_bytes"] <= b["image_bytes"] / 4, (s, b)
assert f["startup"]["node_window_bytes"] == f["build"]["image_bytes"] == b["image_bytes"], f
print(f"bench: 8 nodes, DP 16: node window {s['node_window_bytes']} B = "
      f"{s['node_window_bytes'] / b['image_bytes']:.3f} of the image ({b['image_bytes']} B); "
      "--node-window full: the whole image")
PY
  fail "bench JSON at 8 simulated nodes (see above)"

# 4b. Node windows on one node and on 16: the same data as the whole image. The real node with
#     --node-window reads (one window holding all 16 DP ranks' samples from the cursor) and
#     16 simulated nodes of one rank each, against the real node's whole image (dump of 1).
run16 dp16.reads1 --global-batch-size 64 --train-iters 2 --consumed-samples 64 \
  --node-window reads --dump "$WORK/dp16.reads1" ||
  { cat "$WORK/dp16.reads1.out"; fail "--node-window reads on one node failed"; }
run16 dp16.reads16 --global-batch-size 64 --train-iters 2 --consumed-samples 64 \
  --node-window reads --testing-ranks-per-node 1 --dump "$WORK/dp16.reads16" ||
  { cat "$WORK/dp16.reads16.out"; fail "--node-window reads on 16 nodes failed"; }
for d in dp16.reads1 dp16.reads16; do
  diff -r "$WORK/dp16.real" "$WORK/$d" > /dev/null ||
    fail "$d: node windows read other data than the whole image"
done
echo "node windows on 1 and 16 nodes: dumps identical to the whole image"
# Refused with the flag named: a cyclic sampler (every sample again each epoch).
set +e
timeout 60 "$GRIDFEED" run "${BASE[@]}" --train-iters 1 --dataloader-type cyclic \
  --node-window reads > "$WORK/cyclic.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q -- "--node-window reads needs --dataloader-type single" "$WORK/cyclic.out" ||
  { cat "$WORK/cyclic.out"; fail "--node-window reads with a cyclic sampler accepted"; }

# 5. The projection (bench --project-nodes N --project-dp D) from the measured start-up of
#    TP 2 x PP 2 x DP 4 at 8 simulated nodes, checked against arithmetic done here from the
#    JSON's measured start-up and the grid rule (readers: tp 0 of the first and last stages).
timeout 120 mpirun -n 16 --oversubscribe "$GRIDFEED" bench "${BASE[@]}" --samples 100 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --testing-ranks-per-node 2 \
  --node-window full --project-nodes 1000 --project-dp 4000 --json > "$WORK/project.json" 2> "$WORK/project.err" ||
  { cat "$WORK/project.err"; fail "bench --project-nodes failed"; }
/usr/bin/python3 - "$WORK/project.json" <<'PY' || fail "projection arithmetic (see above)"
import json, math, sys
r = json.load(open(sys.argv[1]))
s, p = r["startup"], r["projection"]
N, D = 1000, 4000
assert s["nodes"] == 8 and s["readers"] == 2 * 4, s  # 2 stages x DP 4 readers, 1 per node
assert p["nodes"] == N and p["data_parallel_size"] == D, p
assert p["readers"] == 2 * D and p["readers_per_node"] == math.ceil(2 * D / N) == 8, p
assert p["node_window_bytes"] == s["node_window_bytes"] == r["build"]["image_bytes"], (p, s)
assert p["plain_copy_bytes_per_node"] == 8 * s["node_window_bytes"], p
close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))
assert close(p["build_seconds"], s["build_seconds"]), p
assert close(p["broadcast_seconds"], s["broadcast_seconds"] * 10 / 3), p  # ceil(log2 1000) / ceil(log2 8)
assert close(p["open_seconds"], s["open_seconds"]), p
assert close(p["seconds"], s["build_seconds"] + s["broadcast_seconds"] * 10 / 3 + s["open_seconds"]), p
assert "ceil(log2 N)" in p["formula"], p
print(f"projection: {N} nodes at DP {D}: {p['readers_per_node']} readers per node, "
      f"{p['seconds']:.3f} s start-up (arithmetic checked)")
PY
timeout 120 mpirun -n 4 --oversubscribe "$GRIDFEED" bench "${BASE[@]}" --samples 50 \
  --testing-ranks-per-node 2 --project-nodes 64 --project-dp 64 > "$WORK/project.txt" 2>&1 ||
  { cat "$WORK/project.txt"; fail "bench --project-nodes (table) failed"; }
grep -q "^PROJECTION (not measured) onto 64 nodes at DP 64" "$WORK/project.txt" ||
  { cat "$WORK/project.txt"; fail "no labelled projection in the table"; }
# Refused: one flag without the other; a run with one node measured no broadcast to project.
set +e
timeout 60 "$GRIDFEED" bench "${BASE[@]}" --samples 50 --project-nodes 8 > "$WORK/e1" 2>&1
rc1=$?
timeout 120 mpirun -n 2 --oversubscribe "$GRIDFEED" bench "${BASE[@]}" --samples 50 \
  --project-nodes 8 --project-dp 8 > "$WORK/e2" 2>&1
rc2=$?
set -e
[ "$rc1" -ne 0 ] && grep -q -- "--project-nodes and --project-dp go together" "$WORK/e1" ||
  { cat "$WORK/e1"; fail "--project-nodes without --project-dp accepted"; }
[ "$rc2" -ne 0 ] && [ "$rc2" -ne 124 ] &&
  [ "$(grep -c -- "error (rank .*--project-nodes needs a broadcast between nodes" "$WORK/e2")" -eq 2 ] ||
  { cat "$WORK/e2"; fail "a projection from one node accepted (or not on every rank)"; }
echo "projection: ok"
echo "cli nodes scale: ok"
