#!/usr/bin/env bash
# `gridfeed bench` on the golden corpora: the table and --json single-process (Megatron,
# a mixture schedule, an OLMo configuration) and under mpirun -n 3 (start-up per phase), every
# JSON key with a sane value; bad options are clear errors naming the flag, on every rank,
# without a hang. No timed assertions: only that times are positive and sizes consistent.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
OLMO=$(realpath "$2/../olmo")
WORK=$(mktemp -d /tmp/gridfeed_bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
FLAGS=(--data-path corpora/corpus_u16 --split 969,30,1 --seq-length 64 --seed 1234
       --train-samples 3000 --valid-samples 120 --test-samples 30 --micro-batch-size 4)
fail() { echo "FAIL: $*" >&2; exit 1; }

# check.py RANKS SAMPLES TOKENS < json: every key, positive times, consistent sizes.
cat > "$WORK/check.py" <<'PY'
import json, sys
ranks, samples, tokens = (int(a) for a in sys.argv[1:4])
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
assert len(lines) == 1, f"expected one JSON line on stdout, got {len(lines)}: {lines}"
r = json.loads(lines[0])
assert set(r) == {"pipeline", "split", "seq_length", "ranks", "build", "assembly", "startup",
                  "projection"}, r
assert r["projection"] is None, r["projection"]  # only with --project-nodes
assert r["ranks"] == ranks and r["split"] == "train" and r["seq_length"] > 0, r
b = r["build"]
assert set(b) == {"build_seconds", "image_write_seconds", "table_bytes", "image_bytes",
                  "rss_before_bytes", "peak_rss_bytes", "peak_since_build", "producers",
                  "max_producer_peak_bytes", "image_digest", "sections"}, b
assert b["producers"] == 1 and b["max_producer_peak_bytes"] > 0, b  # one node: one producer
assert len(b["image_digest"]) == 16 and b["image_digest"] != "0" * 16, b
assert b["build_seconds"] > 0 and b["image_write_seconds"] > 0, b
assert 0 < b["table_bytes"] <= b["image_bytes"], b
assert b["peak_rss_bytes"] >= b["table_bytes"] and b["peak_rss_bytes"] >= b["rss_before_bytes"] > 0, b
a = r["assembly"]
assert set(a) == {"samples", "split_length", "tokens_per_sample", "read_seconds", "read_samples_per_second",
                  "floor_seconds", "floor_samples_per_second", "read_over_floor"}, a
assert a["samples"] == samples if samples else a["samples"] > 0, a
assert a["split_length"] > 0, a
assert a["tokens_per_sample"] == tokens, a
assert a["read_seconds"] > 0 and a["floor_seconds"] > 0, a
assert abs(a["read_samples_per_second"] * a["read_seconds"] - a["samples"]) < 1e-6 * a["samples"], a
assert a["floor_samples_per_second"] > 0 and a["read_over_floor"] > 0, a
s = r["startup"]
if ranks == 1:
    assert s is None, s
else:
    assert set(s) == {"seconds", "build_seconds", "broadcast_seconds", "open_seconds",
                      "cpu_rank0_seconds", "cpu_others_seconds", "nodes", "node_window_bytes",
                      "readers"}, s
    # One machine, one window; every window holds the whole image today.
    assert s["nodes"] == 1 and s["readers"] == ranks, s
    assert s["node_window_bytes"] == b["image_bytes"], (s, b)
    assert s["seconds"] > 0 and s["build_seconds"] > 0 and s["broadcast_seconds"] > 0, s
    assert s["open_seconds"] > 0 and s["cpu_rank0_seconds"] > 0 and s["cpu_others_seconds"] >= 0, s
    assert s["seconds"] >= s["build_seconds"], s
print(f"{r['pipeline']}: ok ({a['read_over_floor']:.2f}x floor)")
PY
check() { /usr/bin/python3 "$WORK/check.py" "$@" || fail "bad JSON (see above)"; }

# 1. Megatron, one process: the table, then --json with a fixed count.
"$GRIDFEED" bench "${FLAGS[@]}" > "$WORK/table.txt" || fail "bench"
for row in "table build (world rank 0)" "peak RSS" "image (broadcast)" "Read() / floor" \
           "memcpy + widen floor"; do
  grep -qF "$row" "$WORK/table.txt" || { cat "$WORK/table.txt"; fail "no '$row' row"; }
done
! grep -q "start-up" "$WORK/table.txt" || fail "start-up reported without mpirun"
"$GRIDFEED" bench "${FLAGS[@]}" --samples 500 --json | check 1 500 65

# 2. Under mpirun: rank 0 prints one report with the start-up per phase.
timeout 300 mpirun -n 3 --oversubscribe "$GRIDFEED" bench "${FLAGS[@]}" --samples 300 --json \
  > "$WORK/mpi.json" || fail "bench under mpirun"
check 3 300 65 < "$WORK/mpi.json"
timeout 300 mpirun -n 3 --oversubscribe "$GRIDFEED" bench "${FLAGS[@]}" --samples 300 \
  > "$WORK/mpi.txt" || fail "bench table under mpirun"
grep -q "start-up until every rank is ready (3 ranks" "$WORK/mpi.txt" || { cat "$WORK/mpi.txt"; fail "no start-up"; }
[ "$(grep -c "^gridfeed bench:" "$WORK/mpi.txt")" -eq 1 ] || fail "more than one rank printed"

# 3. A mixture schedule and an OLMo configuration go through the same pipeline seam.
cat > "$WORK/mix.yaml" <<YAML
seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32}
schedule:
  - {name: main, samples: 96, mixture: {u16: 0.6, i32: 0.4}}
YAML
"$GRIDFEED" bench --config "$WORK/mix.yaml" --samples 200 --json | check 1 200 65
cat > "$WORK/olmo.yaml" <<'YAML'
{"seed": 6198, "global_train_batch_size": 2, "device_train_batch_size": 2,
 "device_train_microbatch_size": 2,
 "model": {"max_sequence_length": 64, "pad_token_id": 1, "eos_token_id": 50279},
 "data": {"paths": ["corpora/u16/part-001.npy", "corpora/u16/part-003.npy"],
          "memmap_dtype": "uint16", "drop_last": true}}
YAML
(cd "$OLMO" && "$GRIDFEED" bench --config "$WORK/olmo.yaml" --samples 50 --json) | check 1 50 64

# 4. Errors: a bad value names its flag; on every rank, and the job ends (no hang).
expect_error() {  # $1: pattern, $2: expected count, then the command
  local pattern=$1 count=$2
  shift 2
  set +e
  timeout 120 "$@" > "$WORK/err.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -ne 0 ] || { cat "$WORK/err.out"; fail "accepted: $*"; }
  [ "$rc" -ne 124 ] || fail "hung: $*"
  local n
  n=$(grep -c -- "$pattern" "$WORK/err.out" || true)
  [ "$n" -eq "$count" ] || { cat "$WORK/err.out"; fail "expected '$pattern' $count times, got $n"; }
}
expect_error "--samples must be" 1 "$GRIDFEED" bench "${FLAGS[@]}" --samples -2
expect_error "--seq-length" 1 "$GRIDFEED" bench "${FLAGS[@]}" --seq-length 0
expect_error "--bogus" 1 "$GRIDFEED" bench "${FLAGS[@]}" --bogus
expect_error "error (rank .*--samples must be" 3 \
  mpirun -n 3 --oversubscribe "$GRIDFEED" bench "${FLAGS[@]}" --samples -2
# Rank 0's build fails while the others wait: every rank reports it.
expect_error "error (rank .*corpora/none" 3 \
  mpirun -n 3 --oversubscribe "$GRIDFEED" bench --data-path corpora/none --seq-length 8
echo "cli bench: ok"
