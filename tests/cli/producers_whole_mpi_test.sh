#!/usr/bin/env bash
# Many table producers of the whole image (--table-producers where every node holds the whole
# image; order/pipeline.h: WholeShareUnits/BuildWholeShare, WholeSections/AssembleWholeImage) on
# 4 simulated nodes of 2 ranks: a Megatron weighted blend under --node-window full and a mixture
# schedule give, by 4 producers, the image digest and every rank's dump of one producer; a
# producer that sends changed sections ends the job on every rank, naming it.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_producers_whole.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
MEGATRON=(--data-path 0.4 corpora/corpus_u16 0.3 corpora/corpus_i32 0.2 corpora/corpus_multi
          0.1 corpora/corpus_tiny --split 100,0,0 --seq-length 64 --train-samples 3000
          --valid-samples 0 --test-samples 0 --micro-batch-size 4 --global-batch-size 32
          --train-iters 4 --consumed-samples 64 --node-window full)
cat > "$WORK/s.yaml" <<YAML
seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32, multi: corpora/corpus_multi}
schedule:
  - {name: main, samples: 96, mixture: {u16: 0.6, i32: 0.3, multi: 0.1}}
  - {name: anneal, samples: 96, mixture: {u16: 0.2, i32: 0.3, multi: 0.5}, ramp_samples: 32}
max_epochs: {multi: 3}
YAML
MIXTURE=(--config "$WORK/s.yaml" --micro-batch-size 2 --global-batch-size 16 --train-iters 12)
run8() {  # run8 NAME ARGS...: 8 ranks as 4 simulated nodes, output in $WORK/NAME.out
  local name=$1
  shift
  timeout 60 mpirun -n 8 --oversubscribe "$GRIDFEED" run --testing-ranks-per-node 2 "$@" \
    > "$WORK/$name.out" 2>&1
}
built_by() { sed -n 's/^tables built by \([0-9]*\) producers\{0,1\};.*image digest \([0-9a-f]*\)$/\1 \2/p' "$1"; }

# 1. One producer and four give the same whole image and the same samples on every rank.
same() {  # same NAME BUILDERS ARGS...: BUILDERS, the producers given a store by auto's four
  local name=$1 builders=$2
  shift 2
  run8 "$name.one" "$@" --table-producers 1 --dump "$WORK/$name.one" --save "$WORK/$name.one.h5" ||
    { cat "$WORK/$name.one.out"; fail "$name, one producer: run failed"; }
  run8 "$name.many" "$@" --dump "$WORK/$name.many" --save "$WORK/$name.many.h5" ||
    { cat "$WORK/$name.many.out"; fail "$name, auto producers: run failed"; }
  read -r p1 d1 <<< "$(built_by "$WORK/$name.one.out")"
  read -r pn dn <<< "$(built_by "$WORK/$name.many.out")"
  [ "$p1" = 1 ] || { cat "$WORK/$name.one.out"; fail "$name, --table-producers 1: built by '$p1'"; }
  [ "$pn" = "$builders" ] ||
    { cat "$WORK/$name.many.out"; fail "$name, auto on 4 nodes: built by '$pn', not $builders"; }
  [ -n "$d1" ] && [ "$d1" = "$dn" ] || fail "$name: image digest $d1 (one) != $dn (four)"
  diff -r "$WORK/$name.one" "$WORK/$name.many" > "$WORK/$name.diff" ||
    { head "$WORK/$name.diff"; fail "$name: dumps differ between one and four producers"; }
  # The data named alike: the checkpoints' fingerprint and canonical text (their attributes).
  [ -s "$WORK/$name.one.h5" ] && [ -s "$WORK/$name.many.h5" ] || fail "$name: no checkpoints"
  if command -v h5dump > /dev/null; then
    cmp <(h5dump -A "$WORK/$name.one.h5" | tail -n +2) <(h5dump -A "$WORK/$name.many.h5" | tail -n +2) ||
      fail "$name: the checkpoints' attributes (fingerprint, canonical text) differ"
  fi
  echo "$name: 4 producers, image digest $dn, 8 dumps and the fingerprint identical to one producer's"
}
# Four stores among four producers; the mixture's three sources leave one producer idle.
same megatron 4 "${MEGATRON[@]}"
same mixture 3 "${MIXTURE[@]}"

# 1b. An amended schedule on resume (world rank 0 compares the past in its whole image, made by
#     4 producers): a changed future is accepted, a changed past refused.
sed 's/u16: 0.2, i32: 0.3, multi: 0.5/u16: 0.1, i32: 0.1, multi: 0.8/' "$WORK/s.yaml" > "$WORK/future.yaml"
sed 's/u16: 0.6, i32: 0.3, multi: 0.1/u16: 0.5, i32: 0.4, multi: 0.1/' "$WORK/s.yaml" > "$WORK/past.yaml"
cmp -s "$WORK/s.yaml" "$WORK/future.yaml" || cmp -s "$WORK/s.yaml" "$WORK/past.yaml" &&
  fail "the amended schedules are the same as the saved one"
AMEND=(--micro-batch-size 2 --global-batch-size 16 --train-iters 12 --allow-schedule-change)
run8 saved "${MIXTURE[@]:0:2}" "${AMEND[@]:0:4}" --train-iters 4 --save "$WORK/ck.h5" ||
  { cat "$WORK/saved.out"; fail "mixture run to a checkpoint"; }
run8 future --config "$WORK/future.yaml" "${AMEND[@]}" --resume "$WORK/ck.h5" ||
  { cat "$WORK/future.out"; fail "an amended future was refused"; }
grep -q "resuming with an amended mixture schedule from sample 64" "$WORK/future.out" &&
  [ "$(built_by "$WORK/future.out" | cut -d' ' -f1)" = 3 ] ||
  { cat "$WORK/future.out"; fail "amended future: not resumed, or not by 3 producers"; }
if run8 past --config "$WORK/past.yaml" "${AMEND[@]}" --resume "$WORK/ck.h5"; then
  fail "an amended past was accepted"
fi
grep -q "changes the order before the cursor (64 samples)" "$WORK/past.out" ||
  { cat "$WORK/past.out"; fail "amended past: not refused for its past"; }
echo "amended mixture: a changed future resumes, a changed past is refused (4 producers)"

# 2. A producer's changed sections: every rank ends non-zero, promptly, naming it.
start=$(date +%s)
set +e
run8 changed "${MEGATRON[@]}" --testing-corrupt-sections-producer 1
rc=$?
set -e
[ "$rc" -ne 0 ] || { cat "$WORK/changed.out"; fail "changed sections: the job succeeded"; }
[ "$rc" -ne 124 ] || { cat "$WORK/changed.out"; fail "changed sections: the job hung"; }
[ $(( $(date +%s) - start )) -lt 30 ] || fail "changed sections: the job took too long to end"
pattern="the sections from producer 1 fail their digest (changed on the way?): refused"
n=$(grep -cF "$pattern" "$WORK/changed.out" || true)
[ "$(grep -c "^gridfeed run: error (rank [0-7]): " "$WORK/changed.out" || true)" -eq 8 ] &&
  [ "$n" -eq 8 ] || { cat "$WORK/changed.out"; fail "changed sections: expected on 8 ranks, got $n"; }
[ "$(grep "^gridfeed run: error" "$WORK/changed.out" | sed 's/^gridfeed run: error (rank [0-7]): //' |
     sort -u | wc -l)" -eq 1 ] || { cat "$WORK/changed.out"; fail "ranks ended with different errors"; }
echo "changed sections: refused on all 8 ranks, naming producer 1"
echo "cli producers whole: ok"
