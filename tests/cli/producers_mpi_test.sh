#!/usr/bin/env bash
# Many table producers (--table-producers; order/node_image.h) on simulated nodes: the node
# leaders build a weighted blend's tables together, each its share of the stores, and every
# node's image is byte for byte the one world rank 0 alone makes. Checks: the image digest and
# every rank's dump equal one producer's at 4 x 2 and 2 x 4; one real node keeps one producer;
# a producer that fails, sends changed sections or dies ends the job on every rank, promptly,
# with a message naming it; a bad value is refused on every rank.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_producers.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
FLAGS=(--data-path 0.4 corpora/corpus_u16 0.3 corpora/corpus_i32 0.2 corpora/corpus_multi
       0.1 corpora/corpus_tiny --split 100,0,0 --seq-length 64 --train-samples 3000
       --valid-samples 0 --test-samples 0 --micro-batch-size 4 --global-batch-size 32
       --train-iters 4 --consumed-samples 64)
fail() { echo "FAIL: $*" >&2; exit 1; }
run8() {  # run8 NAME ARGS...: 8 ranks, output in $WORK/NAME.out
  local name=$1
  shift
  timeout 120 mpirun -n 8 --oversubscribe "$GRIDFEED" run "${FLAGS[@]}" "$@" \
    > "$WORK/$name.out" 2>&1
}
built_by() { sed -n 's/^tables built by \([0-9]*\) producers\{0,1\};.*image digest \([0-9a-f]*\)$/\1 \2/p' "$1"; }

# 1. One producer and many give the same images and the same samples on every rank.
for per in 2 4; do
  nodes=$((8 / per))
  run8 "one$per" --testing-ranks-per-node "$per" --table-producers 1 --dump "$WORK/one$per" ||
    { cat "$WORK/one$per.out"; fail "$nodes nodes, one producer: run failed"; }
  run8 "many$per" --testing-ranks-per-node "$per" --dump "$WORK/many$per" ||
    { cat "$WORK/many$per.out"; fail "$nodes nodes, auto producers: run failed"; }
  read -r p1 d1 <<< "$(built_by "$WORK/one$per.out")"
  read -r pn dn <<< "$(built_by "$WORK/many$per.out")"
  [ "$p1" = 1 ] || { cat "$WORK/one$per.out"; fail "--table-producers 1: built by '$p1'"; }
  [ "$pn" = "$nodes" ] || { cat "$WORK/many$per.out"; fail "auto on $nodes nodes: built by '$pn'"; }
  [ -n "$d1" ] && [ "$d1" = "$dn" ] || fail "$nodes nodes: image digest $d1 (one) != $dn (many)"
  diff -r "$WORK/one$per" "$WORK/many$per" > "$WORK/diff$per" ||
    { head "$WORK/diff$per"; fail "$nodes nodes: dumps differ between one and $pn producers"; }
  echo "$nodes nodes: $pn producers, image digest $dn and 8 dumps identical to one producer's"
  [ "$per" = 2 ] && digest4=$d1
done
run8 three --testing-ranks-per-node 2 --table-producers 3
read -r p3 d3 <<< "$(built_by "$WORK/three.out")"
[ "$p3" = 3 ] && [ "$d3" = "$digest4" ] || { cat "$WORK/three.out"; fail "3 producers: '$p3' '$d3'"; }
run8 real
[ "$(built_by "$WORK/real.out" | cut -d' ' -f1)" = 1 ] ||
  { cat "$WORK/real.out"; fail "one real node: expected one producer"; }
echo "3 of 4 producers: same digest; one real node: one producer"

# 1b. bench --json at 8 simulated nodes of 2 ranks reports who built the tables, the largest
#     process's peak memory and the image digest, the same digest either way.
for p in 1 auto; do
  timeout 120 mpirun -n 16 --oversubscribe "$GRIDFEED" bench "${FLAGS[@]}" --samples 100 \
    --global-batch-size 64 --testing-ranks-per-node 2 --table-producers "$p" --json \
    > "$WORK/bench.$p.json" 2> "$WORK/bench.err" || { cat "$WORK/bench.err"; fail "bench $p"; }
done
/usr/bin/python3 - "$WORK/bench.1.json" "$WORK/bench.auto.json" <<'PY' ||
import json, sys
one, many = (json.load(open(p))["build"] for p in sys.argv[1:3])
# 8 nodes, 4 stores: four producers build, the other four only assemble their nodes' images.
assert one["producers"] == 1 and many["producers"] == 4, (one, many)
assert one["image_digest"] == many["image_digest"] != "0" * 16, (one, many)
assert one["max_producer_peak_bytes"] > 0 and many["max_producer_peak_bytes"] > 0, (one, many)
print(f"bench: {many['producers']} producers on 8 nodes, image digest {many['image_digest']} as one producer's; largest "
      f"peak {many['max_producer_peak_bytes']} B against {one['max_producer_peak_bytes']} B")
PY
  fail "bench JSON with producers (see above)"

# 1c. The producers' projection (bench --project-nodes), checked against arithmetic done here
#     from the per-section costs in the same JSON (docs/benchmarks.md, the bench section).
timeout 120 mpirun -n 4 --oversubscribe "$GRIDFEED" bench "${FLAGS[@]}" --samples 100 \
  --testing-ranks-per-node 2 --project-nodes 3 --project-dp 6 --project-scale 2.5 \
  --project-cores-per-node 0.5 --json > "$WORK/project.json" 2> "$WORK/project.err" ||
  { cat "$WORK/project.err"; fail "bench --project-nodes with producers failed"; }
/usr/bin/python3 - "$WORK/project.json" <<'PY' || fail "producers' projection arithmetic (see above)"
import json, sys
r = json.load(open(sys.argv[1]))
b, s, q = r["build"], r["build"]["sections"], r["projection"]["producers"]
N, S, c = 3, 2.5, 0.5
costs = s["store_index_bytes"]
assert len(costs) == 4 and q["producers"] == N and q["scale"] == S and q["cores_per_node"] == c, q
load = [0] * N  # the largest first, to the least loaded (ties: the lowest)
for k in sorted(range(len(costs)), key=lambda k: -costs[k]):
    load[load.index(min(load))] += max(costs[k], 1)
share = max(load) / sum(costs)
L, T, B = s["split_length"] * S, b["table_bytes"] * S, s["blend_bytes"] * S
per = s["node_image_bytes_per_sample"]
window = s["node_image_fixed_bytes"] + per * L / N + 4 * L
sections = max(0, per - 20) * L * share
base = b["rss_before_bytes"]
peak = max(base + B + T * share + sections, base + B + sections + window, base + 2 * window)
work = (s["open_seconds"] + s["tables_seconds"]) * s["threads"] * S
build = (work * share + s["blend_seconds"] * S) / c
cut = s["node_image_seconds_per_sample"] * L * (share + 1 / N)
rate = b["image_bytes"] / b["image_write_seconds"]
after = (cut + (sections + 2 * window) / rate) / min(c, 1)
close = lambda a, e: abs(a - e) <= 1e-6 * max(1.0, abs(e)) + 1
assert abs(q["share"] - share) < 1e-12, (q, share)
assert close(q["node_window_bytes"], window) and close(q["producer_peak_bytes"], peak), q
assert abs(q["build_seconds"] - build) < 1e-9 and abs(q["sections_seconds"] - after) < 1e-9, q
assert abs(q["seconds"] - (build + after + r["startup"]["open_seconds"])) < 1e-9, q
print(f"producers' projection: 3 nodes, 2.5x the corpus: window {q['node_window_bytes']} B, "
      f"peak {q['producer_peak_bytes']} B, {q['seconds']:.3f} s (arithmetic checked)")
PY

# 2. Faults: every rank ends non-zero, well within the timeout, naming the producer.
expect_all() {  # expect_all NAME PATTERN: the same error, naming it, on all 8 ranks
  local out="$WORK/$1.out"
  local n
  n=$(grep -c "^gridfeed run: error (rank [0-7]): .*$2" "$out" || true)
  [ "$n" -eq 8 ] || { cat "$out"; fail "$1: expected '$2' on 8 ranks, got $n"; }
  [ "$(grep "^gridfeed run: error" "$out" | sed 's/^gridfeed run: error (rank [0-7]): //' |
       sort -u | wc -l)" -eq 1 ] || { cat "$out"; fail "$1: ranks ended with different errors"; }
}
fault() {  # fault NAME ARGS...: runs, expecting a prompt non-zero end; sets $rc
  local name=$1
  shift
  local start
  start=$(date +%s)
  set +e
  run8 "$name" --testing-ranks-per-node 2 "$@"
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || { cat "$WORK/$name.out"; fail "$name: the job succeeded"; }
  [ "$rc" -ne 124 ] || { cat "$WORK/$name.out"; fail "$name: the job hung"; }
  [ $(( $(date +%s) - start )) -lt 60 ] || fail "$name: the job took too long to end"
}
fault failed --testing-fail-producer 2
expect_all failed "rank 4: table producer 2: cannot build its share (injected by test)"
fault changed --testing-corrupt-sections-producer 1
expect_all changed "the sections from producer 1 fail their digest (changed on the way?): refused"
fault killed --testing-kill-producer 3
grep -q "process rank 6 .*exited on signal 9" "$WORK/killed.out" ||
  { cat "$WORK/killed.out"; fail "killed producer: mpirun did not name world rank 6"; }
fault bad --table-producers 0
expect_all bad "--table-producers must be auto or a count in \[1, 2^20\], got '0'"
echo "faults: failed, changed and killed producers end the job promptly, naming them"
echo "cli producers: ok"
