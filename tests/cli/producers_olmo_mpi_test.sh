#!/usr/bin/env bash
# Many table producers of OLMo's whole image (--table-producers; Pipeline::WholeShareUnits):
# the node leaders of 4 simulated nodes (8 ranks, 2 per node) each shuffle their share of the
# epochs, and the image every node holds is byte for byte the one world rank 0 alone makes.
# Checks, on a data mix with labels over five token files: 5 epochs built by one producer and
# by auto (4 producers) give the same image digest and the same dump on every rank; 3 of 4
# producers give that digest too; auto builds 3 epochs with 3 producers (one producer's image)
# and one epoch with one; a producer whose sections change on the way is named on every rank,
# as is one whose node sees other token files (no wait).
#   producers_olmo_mpi_test.sh GRIDFEED GOLDEN_OLMO_DIR
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_producers_olmo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"  # the paths are relative to the golden folder, as in OLMo's configurations
fail() { echo "FAIL: $*" >&2; exit 1; }
# 432 instances of 128 tokens; DP 8, device batch 4 in micro-batches of 2: 54 instances per
# rank and epoch, 4 per iteration (60 iterations: 5 epochs, 30: 3, 10: 1).
CONFIG="$WORK/olmo.yaml"
cat > "$CONFIG" <<'EOF'
{"seed": 5, "global_train_batch_size": 32, "device_train_microbatch_size": 2,
 "model": {"max_sequence_length": 128},
 "data": {"memmap_dtype": "uint16",
          "datasets": {"web": ["corpora/u16/part-000.npy", "corpora/u16/part-003.npy"],
                       "books": ["corpora/u16/part-001.npy", "corpora/u16/part-002.npy",
                                 "corpora/u16/part-004.npy"]}}}
EOF
run8() {  # run8 NAME ITERS ARGS...: 8 ranks on 4 simulated nodes, output in $WORK/NAME.out
  local name=$1 iters=$2
  shift 2
  timeout 60 mpirun -n 8 --oversubscribe "$GRIDFEED" run --config "$CONFIG" \
    --train-iters "$iters" --testing-ranks-per-node 2 "$@" > "$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "$name: run failed"; }
}
built_by() { sed -n 's/^tables built by \([0-9]*\) producers\{0,1\};.*image digest \([0-9a-f]*\)$/\1 \2/p' "$1"; }
epochs_of() { sed -n 's/.*OLMo order: .*, \([0-9]*\) epoch(s) from epoch.*/\1/p' "$1" | head -1; }

# 1. 5 epochs: one producer and auto (4) give the same image and the same samples everywhere.
run8 one 60 --table-producers 1 --dump "$WORK/one"
run8 auto 60 --table-producers auto --dump "$WORK/auto"
[ "$(epochs_of "$WORK/one.out")" = 5 ] || { cat "$WORK/one.out"; fail "expected 5 epochs"; }
read -r p1 d1 <<< "$(built_by "$WORK/one.out")"
read -r pn dn <<< "$(built_by "$WORK/auto.out")"
[ "$p1" = 1 ] || { cat "$WORK/one.out"; fail "--table-producers 1: built by '$p1'"; }
[ "$pn" = 4 ] || { cat "$WORK/auto.out"; fail "auto on 4 nodes, 5 epochs: built by '$pn'"; }
[ -n "$d1" ] && [ "$d1" = "$dn" ] || fail "image digest $d1 (one producer) != $dn (4 producers)"
[ "$(ls "$WORK/one" | wc -l)" = 8 ] || fail "expected 8 ranks' dumps, got $(ls "$WORK/one")"
diff -r "$WORK/one" "$WORK/auto" > "$WORK/diff" ||
  { head "$WORK/diff"; fail "dumps differ between one and 4 producers"; }
echo "5 epochs: 4 producers, image digest $dn and 8 dumps identical to one producer's"

# 2. 3 of the 4 leaders produce: the same image.
run8 three 60 --table-producers 3
read -r p3 d3 <<< "$(built_by "$WORK/three.out")"
[ "$p3" = 3 ] && [ "$d3" = "$d1" ] || { cat "$WORK/three.out"; fail "3 producers: '$p3' '$d3'"; }
echo "5 epochs: 3 producers, the same digest"

# 3. auto never has more producers than epochs: 3 epochs, 3 producers (one producer's image);
#    one epoch, one.
run8 one3 30 --table-producers 1
run8 auto3 30
[ "$(epochs_of "$WORK/auto3.out")" = 3 ] || { cat "$WORK/auto3.out"; fail "expected 3 epochs"; }
read -r p1 d1 <<< "$(built_by "$WORK/one3.out")"
read -r pn dn <<< "$(built_by "$WORK/auto3.out")"
[ -n "$d1" ] && [ "$d1" = "$dn" ] || fail "3 epochs: image digest $d1 (one) != $dn (auto)"
[ "$pn" = 3 ] || { cat "$WORK/auto3.out"; fail "auto, 3 epochs: built by '$pn', expected 3"; }
run8 auto1 10
[ "$(epochs_of "$WORK/auto1.out")" = 1 ] || { cat "$WORK/auto1.out"; fail "expected 1 epoch"; }
[ "$(built_by "$WORK/auto1.out" | cut -d' ' -f1)" = 1 ] ||
  { cat "$WORK/auto1.out"; fail "auto, one epoch: expected one producer"; }
echo "auto: 3 epochs by 3 producers, one epoch by one"

# 4. A producer whose sections change on the way ends the job on every rank, naming it.
set +e
timeout 60 mpirun -n 8 --oversubscribe "$GRIDFEED" run --config "$CONFIG" --train-iters 60 \
  --testing-ranks-per-node 2 --testing-corrupt-sections-producer 1 > "$WORK/changed.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/changed.out"; fail "changed sections: rc $rc"; }
n=$(grep -c "^gridfeed run: error (rank [0-7]): .*the sections from producer 1 fail their digest" \
  "$WORK/changed.out" || true)
[ "$n" -eq 8 ] || { cat "$WORK/changed.out"; fail "changed sections: refused on $n of 8 ranks"; }
echo "changed sections: refused on every rank, naming producer 1"

# 5. One node whose token files differ from world rank 0's (a longer file: fewer epochs; a
#    missing one): an error naming the producer on every rank, not a wait. Each simulated node
#    runs in its own folder of links to the files; the last node's part-004 is changed.
for n in 0 1 2 3; do
  mkdir -p "$WORK/node$n/corpora/u16"
  for f in "$GOLDEN"/corpora/u16/part-00[0-4]*.npy; do ln -s "$f" "$WORK/node$n/corpora/u16/"; done
done
printf '#!/bin/sh\ncd "%s/node$((OMPI_COMM_WORLD_RANK / 2))" && exec "%s" "$@"\n' "$WORK" \
  "$GRIDFEED" > "$WORK/per_node.sh"
chmod +x "$WORK/per_node.sh"
differ() {  # differ NAME PATTERN: runs with the last node's files as they are now
  set +e
  timeout 60 mpirun -n 8 --oversubscribe "$WORK/per_node.sh" run --config "$CONFIG" \
    --train-iters 60 --testing-ranks-per-node 2 > "$WORK/$1.out" 2>&1
  rc=$?
  set -e
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/$1.out"; fail "$1: rc $rc (124: a hang)"; }
  n=$(grep -cE "^gridfeed run: error \(rank [0-7]\): .*table producer 3: .*$2" "$WORK/$1.out" || true)
  [ "$n" -eq 8 ] || { cat "$WORK/$1.out"; fail "$1: named on $n of 8 ranks"; }
}
big="$WORK/node3/corpora/u16/part-004.npy"
rm "$big"
for _ in $(seq 12); do cat "$GOLDEN/corpora/u16/part-004.npy"; done > "$big"  # raw tokens
differ longer "divides into [0-9]+ units here, 5 on world rank 0"
rm "$big"
differ missing "part-004.npy"
echo "a node's differing files: refused on every rank, naming its producer"
echo "cli producers olmo: ok"
