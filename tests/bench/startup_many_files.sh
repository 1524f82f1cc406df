#!/usr/bin/env bash
# Start-up of a many-file blend under mpirun (issue 49 item 1): the phases "open token stores"
# and "check token stores" on world rank 0 (GRIDFEED_LOG_LEVEL=DEBUG) and the job's wall time,
# the proof of the same files as before (GRIDFEED_TESTING_FULL_STORE_CHECK=1: every simulated
# node's leader checks and digests every index; rank 0's sampled .bin blocks faulted in through
# the mappings) and as now (readers holding rank 0's very files stat them), alternated in one
# run, on one node and on simulated nodes (--testing-ranks-per-node). Prints the figures and
# their ratios; asserts nothing about time (shared machines are noisy: compare within one run).
#
# Usage: startup_many_files.sh GRIDFEED [FILES=200] [RANKS=8] [REPS=2]
# The corpus (FILES Megatron token stores of lognormal document counts, median 20,000, sparse
# .bin files) is written once to $GRIDFEED_BENCH_BLEND_DIR (default a temporary folder).
set -euo pipefail
GF=$(realpath "${1:?gridfeed binary}")
FILES=${2:-200}
RANKS=${3:-8}
REPS=${4:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
T=$(mktemp -d /tmp/gridfeed_many_files.XXXXXX)
trap 'rm -rf "$T"' EXIT
DIR=${GRIDFEED_BENCH_BLEND_DIR:-$T/blend}
if [ ! -f "$DIR/blend.txt" ]; then
  mkdir -p "$DIR"
  /usr/bin/python3 - "$DIR" "$FILES" <<'PY'
import array, os, random, struct, sys
out, files = sys.argv[1], int(sys.argv[2])
rng = random.Random(1234)
parts = []
for k in range(files):
    n = max(200, round(rng.lognormvariate(9.9, 1.2)))  # median ~20,000 documents
    lengths = array.array("i", (max(1, int(rng.expovariate(1 / 2048))) for _ in range(n)))
    pointers, at = array.array("q"), 0
    for length in lengths:
        pointers.append(at)
        at += 4 * length  # int32 tokens
    prefix = os.path.join(out, f"f{k:05d}")
    with open(prefix + ".idx", "wb") as f:  # Megatron's MMIDIDX v1, dtype 4 (int32)
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, n, n + 1))
        f.write(lengths.tobytes() + pointers.tobytes())
        f.write(array.array("q", range(n + 1)).tobytes())
    with open(prefix + ".bin", "wb") as f:
        f.truncate(at)  # sparse: only the index matters here
    parts += [str(n), prefix]
with open(os.path.join(out, "blend.txt"), "w") as f:
    f.write(" ".join(parts) + "\n")
PY
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load before: $(head -1 /proc/pressure/cpu)"
echo "corpus: $FILES token stores, $(du -cb "$DIR"/*.idx | tail -1 | cut -f1) bytes of indexes; $RANKS ranks"

# one MODE PER: "open check wall" of one job (MODE old|new; PER ranks per simulated node).
one() {
  local env=() log=$T/run.log
  [ "$1" = old ] && env=(GRIDFEED_TESTING_FULL_STORE_CHECK=1)
  env "${env[@]}" GRIDFEED_LOG_LEVEL=DEBUG /usr/bin/time -f "%e" -o "$T/wall" timeout -k 5 600 \
    mpirun -n "$RANKS" --oversubscribe -x GRIDFEED_LOG_LEVEL -x GRIDFEED_TESTING_FULL_STORE_CHECK \
    "$GF" run --data-args-path "$DIR/blend.txt" --split 100,0,0 --seq-length 4096 \
    --train-samples 1000000 --valid-samples 0 --test-samples 0 --vocab-size 128256 \
    --eod-id 128255 --micro-batch-size 1 --global-batch-size "$RANKS" --train-iters 1 \
    --testing-ranks-per-node "$2" > "$log" 2>&1 || { tail -5 "$log" >&2; return 1; }
  local open check
  open=$(sed -n 's/.*start-up phase open token stores: \([0-9.]*\) s/\1/p' "$log")
  check=$(sed -n 's/.*start-up phase check token stores: \([0-9.]*\) s/\1/p' "$log")
  echo "$open $check $(cat "$T/wall")"
}
ratio() { /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); print(f'{a / b:.1f}x' if b > 0 else 'inf')" "$1" "$2"; }

# Uncounted: the first job after the corpus is written faults its pages into the page cache
# (the old path's 64 blocks per .bin with readahead around each: many times the later cost).
echo "warm-up (old path, uncounted): open, check, wall = $(one old "$RANKS")"
for per in "$RANKS" 1; do
  nodes=$((RANKS / per))
  for ((r = 1; r <= REPS; r++)); do
    read -r o_open o_check o_wall < <(one old "$per")
    read -r n_open n_check n_wall < <(one new "$per")
    printf '%d node(s) of %d ranks, pair %d: open+check %.2f+%.2f s -> %.2f+%.2f s (%s), job wall %.1f s -> %.1f s (%s)\n' \
      "$nodes" "$per" "$r" "$o_open" "$o_check" "$n_open" "$n_check" \
      "$(ratio "$(echo "$o_open + $o_check" | bc -l)" "$(echo "$n_open + $n_check" | bc -l)")" \
      "$o_wall" "$n_wall" "$(ratio "$o_wall" "$n_wall")"
  done
done
echo "load after: $(head -1 /proc/pressure/cpu)"
