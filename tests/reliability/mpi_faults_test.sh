#!/usr/bin/env bash
# Faults a cluster and a careless user produce, under mpirun (each case failed before its fix):
#  1. a reader whose token files differ from rank 0's (same size with other tokens, a smaller
#     copy, a valid index of the same size and times with two lengths swapped): refused on every
#     rank, naming rank and store or file, instead of "checks ok" or a segfault; readers holding
#     rank 0's very files (issue 49: stat'ed, not read) or their node leader's take their facts,
#     copies are checked and digested (rank 0's log counts each proof);
#  2. options that drive collectives set differently on one rank (--train-iters,
#     --save-interval, --ledger, --dump): the same clear error everywhere, no hang;
#  3. a restart from an older checkpoint at a smaller DP trims the ledger files of DP ranks that
#     no longer exist, so audit verify accepts the legitimate run;
#  4. after --allow-batch-size-change the ledger's iterations continue the checkpoint's;
#  5. a resume after a .bin changed in place (same size and index) is refused.
# Every mpirun runs under `timeout`: a hang fails the test instead of blocking CI.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_faults.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
fail() { echo "FAIL: $*" >&2; exit 1; }
MPI=(timeout -k 5 120 mpirun --oversubscribe)
F=(--data-path corpora/x --split 98,2,0 --seq-length 64 --train-samples 400 --valid-samples 10
   --micro-batch-size 2 --train-iters 5)

# expect_error LOG PATTERN... : the job failed (not by timeout) and every rank printed PATTERN.
expect_error() {
  local log=$1 rc=$2 ranks=$3
  shift 3
  [ "$rc" -ne 0 ] || { cat "$log"; fail "$log: the job succeeded"; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { cat "$log"; fail "$log: the job hung"; }
  for p in "$@"; do
    local n
    n=$(grep -c -- "$p" "$log" || true)
    [ "$n" -ge "$ranks" ] || { cat "$log"; fail "$log: '$p' printed by $n of $ranks ranks"; }
  done
}

# Node-local copies: every rank resolves corpora/x in its own working directory.
for d in a b c; do mkdir -p "$WORK/$d/corpora"; done
cp "$GOLDEN/corpora/corpus_u16.idx" "$WORK/a/corpora/x.idx"
cp "$GOLDEN/corpora/corpus_u16.bin" "$WORK/a/corpora/x.bin"
cp "$WORK/a/corpora/x.idx" "$WORK/b/corpora/x.idx"
# b: the same size, other tokens (every 2-byte token's bytes swapped).
/usr/bin/python3 - "$WORK/a/corpora/x.bin" "$WORK/b/corpora/x.bin" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[0::2], data[1::2] = data[1::2], data[0::2]
open(sys.argv[2], "wb").write(data)
PY
# c: a smaller, valid corpus under the same name.
cp "$GOLDEN/corpora/corpus_tiny.idx" "$WORK/c/corpora/x.idx"
cp "$GOLDEN/corpora/corpus_tiny.bin" "$WORK/c/corpora/x.bin"
# e: a valid index of the same size, two different adjacent lengths swapped (pointers made
#    anew), with the same .bin and both files' times set to a's: only a digest tells.
mkdir -p "$WORK/e/corpora" "$WORK/a2/corpora"
cp "$WORK/a/corpora/x.bin" "$WORK/e/corpora/x.bin"
/usr/bin/python3 - "$WORK/a/corpora/x.idx" "$WORK/e/corpora/x.idx" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
assert b[:9] == b"MMIDIDX\x00\x00"
dtype, n = b[17], struct.unpack_from("<Q", b, 18)[0]
item = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}[dtype]
lengths = list(struct.unpack_from(f"<{n}i", b, 34))
i = next(k for k in range(n - 1) if lengths[k] != lengths[k + 1])
lengths[i], lengths[i + 1] = lengths[i + 1], lengths[i]
pointers, at = [], 0
for length in lengths:
    pointers.append(at)
    at += length * item
struct.pack_into(f"<{n}i", b, 34, *lengths)
struct.pack_into(f"<{n}q", b, 34 + 4 * n, *pointers)
open(sys.argv[2], "wb").write(b)
PY
touch -r "$WORK/a/corpora/x.idx" "$WORK/e/corpora/x.idx"
touch -r "$WORK/a/corpora/x.bin" "$WORK/e/corpora/x.bin"
# a2: an identical copy, times kept (what a node-local copy is).
cp -p "$WORK/a/corpora/x.idx" "$WORK/a/corpora/x.bin" "$WORK/a2/corpora/"

# 1. Differing token files on one reader.
for other in b c e; do
  set +e
  "${MPI[@]}" -n 1 -wdir "$WORK/a" "$GRIDFEED" run "${F[@]}" : \
    -n 1 -wdir "$WORK/$other" "$GRIDFEED" run "${F[@]}" > "$WORK/files_$other.log" 2>&1
  rc=$?
  set -e
  case $other in
  c) expect_error "$WORK/files_$other.log" $rc 2 \
       "rank 1: token file 'corpora/x.idx' differs from rank 0's: " "bytes here";;
  *) expect_error "$WORK/files_$other.log" $rc 2 "rank 1: token store 'corpora/x'";;
  esac
done
grep -q "other tokens than rank 0's" "$WORK/files_b.log" || fail "same-size copy not named"
grep -q "its .idx differs from rank 0's" "$WORK/files_e.log" || fail "swapped lengths not named"
# The same files everywhere still run.
"${MPI[@]}" -n 2 -wdir "$WORK/a" "$GRIDFEED" run "${F[@]}" > "$WORK/same.log" 2>&1 \
  || { cat "$WORK/same.log"; fail "identical copies refused"; }
# How each reader proved its files: on 4 simulated nodes sharing the files, rank 0's very files
# (nothing read); on 2 simulated nodes, the second of which holds identical copies, that node's
# leader checks and digests them and its peer takes the leader's facts.
proofs() {  # LOG WANT: the job ran and rank 0 counted WANT
  grep -q "proven by $2 (rank 0 included)" "$1" || { cat "$1"; fail "$1: not '$2'"; }
}
GRIDFEED_LOG_LEVEL=DEBUG "${MPI[@]}" -n 4 -x GRIDFEED_LOG_LEVEL -wdir "$WORK/a" "$GRIDFEED" run \
  "${F[@]}" --testing-ranks-per-node 1 > "$WORK/proof1.log" 2>&1 \
  || { cat "$WORK/proof1.log"; fail "shared files on 4 nodes refused"; }
proofs "$WORK/proof1.log" \
  "3 readers as rank 0's very files, 0 as their node leader's, 1 checked and digested"
GRIDFEED_LOG_LEVEL=DEBUG "${MPI[@]}" -x GRIDFEED_LOG_LEVEL \
  -n 2 -wdir "$WORK/a" "$GRIDFEED" run "${F[@]}" --testing-ranks-per-node 2 : \
  -n 2 -wdir "$WORK/a2" "$GRIDFEED" run "${F[@]}" --testing-ranks-per-node 2 \
  > "$WORK/proof2.log" 2>&1 || { cat "$WORK/proof2.log"; fail "identical node copies refused"; }
proofs "$WORK/proof2.log" \
  "1 readers as rank 0's very files, 1 as their node leader's, 2 checked and digested"
# The same copies with one file other: named, on every rank, by the node that holds it.
cp "$WORK/b/corpora/x.bin" "$WORK/a2/corpora/x.bin"
set +e
"${MPI[@]}" -n 2 -wdir "$WORK/a" "$GRIDFEED" run "${F[@]}" --testing-ranks-per-node 2 : \
  -n 2 -wdir "$WORK/a2" "$GRIDFEED" run "${F[@]}" --testing-ranks-per-node 2 \
  > "$WORK/proof3.log" 2>&1
rc=$?
set -e
expect_error "$WORK/proof3.log" $rc 4 "rank 2: token store 'corpora/x': its .bin holds other tokens"

# 2. Options that drive collectives differ on one rank.
cd "$WORK/a"
i=0
for extra in "--train-iters 6" "--save-interval 2" "--ledger $WORK/l1" "--dump $WORK/d1"; do
  i=$((i + 1))
  set +e
  # shellcheck disable=SC2086
  "${MPI[@]}" -n 1 "$GRIDFEED" run "${F[@]}" --save "$WORK/ck$i.h5" : \
    -n 1 "$GRIDFEED" run "${F[@]}" --save "$WORK/ck$i.h5" $extra > "$WORK/opt$i.log" 2>&1
  rc=$?
  set -e
  flag=${extra%% *}
  expect_error "$WORK/opt$i.log" $rc 2 "error"
  grep -q -- "$flag\|--dump, --save" "$WORK/opt$i.log" || { cat "$WORK/opt$i.log"; fail "$flag not named"; }
done

# 3. Restarting from an older checkpoint at a smaller DP: the records past its cursor in the
#    files of DP ranks that no longer exist are trimmed too, so verify accepts the run.
G=(--data-path corpora/x --split 98,2,0 --seq-length 64 --train-samples 400 --valid-samples 10
   --micro-batch-size 2 --global-batch-size 8)
"${MPI[@]}" -n 4 "$GRIDFEED" run "${G[@]}" --train-iters 2 --save "$WORK/r.h5" \
  --ledger "$WORK/rl" > "$WORK/r1.log" 2>&1 || { cat "$WORK/r1.log"; fail "first run"; }
cp "$WORK/r.h5" "$WORK/r_iter2.h5"
"${MPI[@]}" -n 4 "$GRIDFEED" run "${G[@]}" --train-iters 5 --resume "$WORK/r.h5" \
  --ledger "$WORK/rl" > "$WORK/r2.log" 2>&1 || { cat "$WORK/r2.log"; fail "second run"; }
"${MPI[@]}" -n 2 "$GRIDFEED" run "${G[@]}" --train-iters 4 --resume "$WORK/r_iter2.h5" \
  --ledger "$WORK/rl" > "$WORK/r3.log" 2>&1 || { cat "$WORK/r3.log"; fail "resume at DP 2"; }
"$GRIDFEED" audit verify --ledger "$WORK/rl" > "$WORK/rv.log" 2>&1 \
  || { cat "$WORK/rv.log"; fail "verify after a resume at a smaller DP"; }
grep -q "positions \[0, 32) consumed exactly once" "$WORK/rv.log" || { cat "$WORK/rv.log"; fail "verify range"; }

# 4. A batch size change: iterations continue from the checkpoint's.
"${MPI[@]}" -n 2 "$GRIDFEED" run "${G[@]}" --train-iters 3 --save "$WORK/b.h5" \
  --ledger "$WORK/bl" > "$WORK/b1.log" 2>&1 || { cat "$WORK/b1.log"; fail "first run"; }
"${MPI[@]}" -n 2 "$GRIDFEED" run "${G[@]}" --global-batch-size 12 --allow-batch-size-change \
  --train-iters 5 --resume "$WORK/b.h5" --ledger "$WORK/bl" > "$WORK/b2.log" 2>&1 \
  || { cat "$WORK/b2.log"; fail "resume with another batch size"; }
# Positions 24..47 were read in iterations 3 and 4 (12 per iteration after the change).
awk -F'\t' '!/^#/ && $1 ~ /^[0-9]+$/ && $4 >= 24 { print $4, $1 }' "$WORK"/bl/dp*.tsv | sort -n \
  > "$WORK/iters.txt"
/usr/bin/python3 - "$WORK/iters.txt" <<'PY'
import sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
assert len(rows) == 24, len(rows)
for position, iteration in rows:
    want = 3 + (position - 24) // 12
    assert iteration == want, (position, iteration, want)
PY
# 5. A .bin changed in place (same size, same index, other tokens) after a checkpoint: the
#    resume compares the sampled data digest and refuses.
mkdir -p "$WORK/d/corpora"
cp "$WORK/a/corpora/x.idx" "$WORK/a/corpora/x.bin" "$WORK/d/corpora/"
cd "$WORK/d"
"${MPI[@]}" -n 2 "$GRIDFEED" run "${G[@]}" --train-iters 2 --save "$WORK/d.h5" > "$WORK/d1.log" 2>&1 \
  || { cat "$WORK/d1.log"; fail "run before the change"; }
cp "$WORK/b/corpora/x.bin" "$WORK/d/corpora/x.bin"
set +e
"${MPI[@]}" -n 2 "$GRIDFEED" run "${G[@]}" --train-iters 4 --resume "$WORK/d.h5" > "$WORK/d2.log" 2>&1
rc=$?
set -e
expect_error "$WORK/d2.log" $rc 2 "token files changed since it was written"
echo "mpi faults: ok"
