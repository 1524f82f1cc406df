#!/usr/bin/env bash
# Multi-node paths of the table broadcast on one machine: --testing-ranks-per-node N splits the
# 8 ranks into simulated nodes of N consecutive world ranks, each with its own shared window
# and leader, so the leaders' broadcast, their digest checks and per-node windows run with
# 2 and 4 nodes. Checks: the dumps are byte-identical to a run on the real (one) node; run
# reports one window per simulated node with the expected readers; a corrupted image on one
# node's leader ends the job promptly, non-zero, with the same digest error on every rank.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_nodes.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
# TP 2 x PP 2 x DP 2, Megatron's rank order: the readers (tp 0 of both stages) are world
# ranks 0, 2, 4 and 6.
FLAGS=(--data-path corpora/corpus_u16 --split 969,30,1 --seq-length 64 --seed 1234
       --train-samples 3000 --valid-samples 120 --test-samples 30 --micro-batch-size 4
       --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --global-batch-size 16
       --train-iters 4 --consumed-samples 8)
fail() { echo "FAIL: $*" >&2; exit 1; }
run8() {  # run8 NAME ARGS...: 8 ranks, output in $WORK/NAME.out
  local name=$1
  shift
  timeout 120 mpirun -n 8 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" "$@" \
    > "$WORK/$name.out" 2>&1
}

# 1. Real nodes (one machine: one node, one window for the 4 readers), then 2 x 4 and 4 x 2.
run8 real --dump "$WORK/real" || { cat "$WORK/real.out"; fail "real-node run failed"; }
grep -q "^table windows: 1 (.*readers per node: 4)$" "$WORK/real.out" ||
  { cat "$WORK/real.out"; fail "real nodes: expected one window for 4 readers"; }
for case in "4 2 2 2" "2 4 1 1 1 1"; do
  read -r per nodes readers <<< "$case"
  run8 "sim$per" --testing-ranks-per-node "$per" --dump "$WORK/sim$per" ||
    { cat "$WORK/sim$per.out"; fail "$nodes simulated nodes of $per ranks: run failed"; }
  grep -q "^table windows: $nodes (.*readers per node: $readers)$" "$WORK/sim$per.out" ||
    { cat "$WORK/sim$per.out"; fail "$nodes nodes of $per ranks: expected $nodes windows ($readers)"; }
  grep -q "checks: .* ok" "$WORK/sim$per.out" || fail "$nodes nodes: no checks line"
  diff -r "$WORK/real" "$WORK/sim$per" > "$WORK/diff$per" ||
    { head "$WORK/diff$per"; fail "$nodes nodes of $per ranks: dump differs from real nodes"; }
  echo "simulated nodes: $nodes x $per ranks, windows ok, dump identical to real nodes"
done
[ "$(ls "$WORK/real" | wc -l)" -eq 8 ] || fail "expected 8 rank dumps"

# 2. A corrupted image on one simulated node's leader: node 1 of 2 x 4 (leader world rank 4),
#    node 0 of 2 x 4 with the whole order on each node and with node images (world rank 0's
#    own window, whose digest it took itself: checked again only when a test corrupts it),
#    node 3 of 4 x 2 (leader world rank 6). Every rank ends with the same error naming the
#    digest mismatch and the leader; the job ends non-zero well within the timeout.
for case in "4 1 4 auto" "4 0 0 full" "4 0 0 reads" "2 3 6 auto"; do
  read -r per node leader window <<< "$case"
  start=$(date +%s)
  set +e
  run8 "corrupt$per$node" --testing-ranks-per-node "$per" --testing-corrupt-image-node "$node" \
    --node-window "$window"
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  out="$WORK/corrupt$per$node.out"
  [ "$rc" -ne 0 ] || { cat "$out"; fail "corrupted image on node $node accepted"; }
  [ "$rc" -ne 124 ] || { cat "$out"; fail "corrupted image on node $node: job hung"; }
  [ "$elapsed" -lt 60 ] || fail "corrupted image: job took ${elapsed}s to end"
  want="rank $leader: image digest mismatch after the broadcast on node $node "
  n=$(grep -c "^gridfeed run: error (rank [0-7]): .*$want" "$out" || true)
  [ "$n" -eq 8 ] || { cat "$out"; fail "expected '$want' on 8 ranks, got $n"; }
  distinct=$(grep "^gridfeed run: error" "$out" | sed 's/^gridfeed run: error (rank [0-7]): //' |
             sort -u | wc -l)
  [ "$distinct" -eq 1 ] || { cat "$out"; fail "ranks ended with $distinct different errors"; }
  echo "corrupted image on node $node of $((8 / per)): same error on 8 ranks, status $rc after ${elapsed}s"
done

# 3. A bad value is refused before any table, the same on every rank.
set +e
run8 badper --testing-ranks-per-node 9
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/badper.out"; fail "--testing-ranks-per-node 9 accepted"; }
n=$(grep -c "testing-ranks-per-node must be in \[0, world size\], got 9" "$WORK/badper.out" || true)
[ "$n" -eq 8 ] || { cat "$WORK/badper.out"; fail "expected the range error on 8 ranks, got $n"; }
echo "cli nodes: ok"
