#!/usr/bin/env bash
# Careless input, tampered files and odd names at the command line (each case failed before its
# fix): nonsense numbers are refused naming the flag; huge ranges are checked before anything is
# allocated; a split string and a split name stay apart; a tampered ledger is caught, not
# trusted or crashed on; errors are plain; an unwritable --save folder is found at start; SVG
# output escapes markup; a rank-0 allocation failure ends every rank with the same error.
# Every command runs under `timeout`: a hang or a runaway loop fails the test.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_clifaults.XXXXXX)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
T=(timeout -k 5 60)
D=(--data-path corpora/corpus_u16 --split 969,30,1 --seq-length 64 --train-samples 3000
   --valid-samples 120 --test-samples 30)

# refused NAME PATTERN CMD...: the command fails (not by timeout) and prints PATTERN.
refused() {
  local name=$1 pattern=$2
  shift 2
  set +e
  "${T[@]}" "$@" > "$WORK/$name.out" 2>&1
  local rc=$?
  set -e
  [ $rc -ne 0 ] || { cat "$WORK/$name.out"; fail "$name: accepted"; }
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$name: ran past the timeout"
  grep -q -- "$pattern" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: no '$pattern'"; }
}

# Nonsense numbers, each named.
refused neg_gbs "--global-batch-size" mpirun -n 1 "$GRIDFEED" run "${D[@]}" --global-batch-size -8
refused neg_iters "--train-iters" mpirun -n 1 "$GRIDFEED" run "${D[@]}" --train-iters -1
refused huge_weight "blend weights" "$GRIDFEED" tables --data-path 1e308 corpora/corpus_u16 \
  1e308 corpora/corpus_i32 --split 969,30,1 --seq-length 64 --train-samples 100 \
  --valid-samples 10 --test-samples 10 --out "$WORK/t"
refused inf_weight "blend weights" "$GRIDFEED" tables --data-path inf corpora/corpus_u16 \
  1 corpora/corpus_i32 --split 969,30,1 --seq-length 64 --train-samples 100 \
  --valid-samples 10 --test-samples 10 --out "$WORK/t"
refused overflow "--train-samples" "$GRIDFEED" tables --data-path corpora/corpus_u16 \
  --seq-length 4096 --train-samples 9223372036854775000 --out "$WORK/t"
refused nan_surplus "--mid-level-dataset-surplus" "$GRIDFEED" tables "${D[@]}" \
  --mid-level-dataset-surplus nan --out "$WORK/t"
refused mbs_dp "--micro-batch-size" mpirun -n 1 "$GRIDFEED" run "${D[@]}" \
  --micro-batch-size 4611686018427387904
refused neg_steps "--steps" "$GRIDFEED" audit replay "${D[@]}" --data-parallel-size 1 --steps -3:2

# Huge ranges: checked before allocating, and a replay past the split's end stops there.
refused positions "beyond the split" "$GRIDFEED" samples "${D[@]}" \
  --positions 0:1000000000000 --out "$WORK/s"
"${T[@]}" "$GRIDFEED" audit replay "${D[@]}" --data-parallel-size 2 --micro-batch-size 4 \
  --steps 0:1000000000000 --out "$WORK/replay" > "$WORK/replay.out" 2>&1 \
  || { cat "$WORK/replay.out"; fail "replay of a huge step range"; }

# A split string and a split name stay apart.
refused split_name "the split a command reads is --split-name" "$GRIDFEED" samples "${D[@]}" \
  --split valid --positions 0 --out "$WORK/s"
# The .bin or .idx file named where the prefix belongs: the message gives the prefix.
refused bin_as_prefix "a data path is a prefix, without .bin or .idx: 'corpora/corpus_u16'" \
  "$GRIDFEED" tables --data-path corpora/corpus_u16.bin --split 100,0,0 --seq-length 64 \
  --train-samples 10 --out "$WORK/t"
printf 'data-path: [corpora/corpus_u16]\nsplit: "90,10,0"\nseq-length: 64\ntrain-samples: 300\nvalid-samples: 20\n' \
  > "$WORK/c.yaml"
"${T[@]}" "$GRIDFEED" samples --config "$WORK/c.yaml" --split-name valid --positions 0:2 \
  --out "$WORK/v1" > /dev/null 2>&1 || fail "samples --split-name valid"
"${T[@]}" "$GRIDFEED" samples "${D[@]}" --split 90,10,0 --train-samples 300 --valid-samples 20 \
  --split-name valid --positions 0:2 --out "$WORK/v2" > /dev/null 2>&1 || fail "samples explicit"
cmp -s "$WORK/v1/tokens.npy" "$WORK/v2/tokens.npy" || fail "--split-name replaced the config's split"

# Plain errors.
refused subcommand "unknown subcommand 'frobnicate'" "$GRIDFEED" frobnicate
# Each subcommand registers its own options when named first: its help, the top-level help
# (all of them) and `version` still work.
for sub in prep inspect tables samples run audit plan bench; do
  "${T[@]}" "$GRIDFEED" $sub --help > "$WORK/help_$sub.out" 2>&1 || fail "$sub --help"
  grep -q -- "Usage: .* $sub" "$WORK/help_$sub.out" || { cat "$WORK/help_$sub.out"; fail "$sub --help: no usage"; }
  grep -q -- "--" "$WORK/help_$sub.out" || fail "$sub --help lists no option"
done
"${T[@]}" "$GRIDFEED" --help > "$WORK/help.out" 2>&1 || fail "--help"
for sub in prep inspect tables samples run audit plan bench version; do
  grep -q "^  $sub " "$WORK/help.out" || { cat "$WORK/help.out"; fail "--help lacks $sub"; }
done
"${T[@]}" "$GRIDFEED" version | grep -q "^gridfeed " || fail "version"
mkdir -p "$WORK/badidx"
printf 'NOTMAGIC\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' \
  > "$WORK/badidx/x.idx"
: > "$WORK/badidx/x.bin"
refused badmagic "'NOTMAGIC\\\\x01'" "$GRIDFEED" inspect "$WORK/badidx/x"
printf 'seq-length: [64, 65]\n' > "$WORK/type.yaml"
refused yaml_type "key 'seq-length'" "$GRIDFEED" tables --config "$WORK/type.yaml" --out "$WORK/t"

# An unwritable --save folder is found before the first iteration.
mkdir -p "$WORK/ro"
chmod 0555 "$WORK/ro"
if [ "$(id -u)" = 0 ]; then
  # root writes anywhere: a path under a regular file is unwritable for everyone.
  : > "$WORK/file"
  SAVE="$WORK/file/ck.h5"
else
  SAVE="$WORK/ro/ck.h5"
fi
# (DEBUG: the build's "tables built" line shows whether the start-up ran.)
refused save_dir "--save" env GRIDFEED_LOG_LEVEL=DEBUG mpirun -n 1 "$GRIDFEED" run "${D[@]}" \
  --train-iters 3 --save "$SAVE"
if grep -q "tables built" "$WORK/save_dir.out"; then fail "--save was checked only after the start-up"; fi

# A ledger, then tampering. (At DEBUG: an accepted run prints the "tables built" line whose
# absence the --save case above reads.)
GRIDFEED_LOG_LEVEL=DEBUG mpirun -n 2 --oversubscribe "$GRIDFEED" run "${D[@]}" \
  --micro-batch-size 2 --train-iters 4 --ledger "$WORK/l" > "$WORK/ledger_run.out" 2>&1 \
  || fail "ledger run"
grep -q "tables built" "$WORK/ledger_run.out" || fail "no 'tables built' line at DEBUG"
"${T[@]}" "$GRIDFEED" audit verify --ledger "$WORK/l" > /dev/null 2>&1 || fail "verify of a good ledger"
# replay --ledger needs no other flags and gives what the ledger holds.
"${T[@]}" "$GRIDFEED" audit replay --ledger "$WORK/l" --steps 0:4 --out "$WORK/lr" > /dev/null 2>&1 \
  || fail "replay --ledger without flags"
diff <(grep -v '^#' "$WORK/l/dp1.tsv") "$WORK/lr/dp_rank1/records.tsv" > /dev/null || fail "replay differs"
tamper() {  # NAME AWK-PROGRAM: a copy of the ledger with dp1.tsv rewritten
  rm -rf "$WORK/$1"
  cp -r "$WORK/l" "$WORK/$1"
  awk -F'\t' -v OFS='\t' "$2" "$WORK/l/dp1.tsv" > "$WORK/$1/dp1.tsv"
}
# A record's iteration moved (the content still matches): who-read-when is checked.
tamper moved '!/^#/ && $1 == "1" && $2 == "0" { $1 = "2" } { print }'
refused verify_moved "read schedule gives" "$GRIDFEED" audit verify --ledger "$WORK/moved"
# Records swapped between the DP files: the file a record is in is checked.
rm -rf "$WORK/swapped"; cp -r "$WORK/l" "$WORK/swapped"
cp "$WORK/l/dp0.tsv" "$WORK/swapped/dp1.tsv"; cp "$WORK/l/dp1.tsv" "$WORK/swapped/dp0.tsv"
refused verify_swapped "read schedule gives" "$GRIDFEED" audit verify --ledger "$WORK/swapped"
# The fingerprint line does not match the configuration line.
tamper fp '/^# fingerprint / { print "# fingerprint 0123456789abcdef"; next } { print }'
sed -i 's/^# fingerprint .*/# fingerprint 0123456789abcdef/' "$WORK/fp/dp0.tsv"
refused verify_fp "not the hash of the configuration" "$GRIDFEED" audit verify --ledger "$WORK/fp"
# No records: nothing proven.
rm -rf "$WORK/empty"; cp -r "$WORK/l" "$WORK/empty"
for f in "$WORK"/empty/*.tsv; do grep '^#\|^iteration' "$f" > "$f.x"; mv "$f.x" "$f"; done
refused verify_empty "nothing is proven" "$GRIDFEED" audit verify --ledger "$WORK/empty"
# A dataset column out of range: an error, not a crash.
tamper dataset '!/^#/ && $1 ~ /^[0-9]+$/ { $5 = "99999" } { print }'
refused accounting_dataset "is not a source" "$GRIDFEED" audit accounting --ledger "$WORK/dataset"

# SVG escapes markup in source names.
mkdir -p "$WORK/odd"
cp corpora/corpus_u16.bin "$WORK/odd/a&b<c.bin"
cp corpora/corpus_u16.idx "$WORK/odd/a&b<c.idx"
cp corpora/corpus_i32.bin "$WORK/odd/d'e.bin"  # a second source: one source draws no plot
cp corpora/corpus_i32.idx "$WORK/odd/d'e.idx"
(cd "$WORK/odd" && mpirun -n 1 "$GRIDFEED" run --data-path 0.5 'a&b<c' 0.5 "d'e" \
  --vocab-size 128256 --split 100,0,0 \
  --seq-length 64 --train-samples 40 --micro-batch-size 2 --train-iters 4 --ledger l \
  > run.out 2>&1 && "$GRIDFEED" audit accounting --ledger l --plot p.svg > acc.out 2>&1) \
  || { cat "$WORK/odd/run.out" "$WORK/odd/acc.out" 2>/dev/null; fail "accounting with an odd name"; }
/usr/bin/python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); \
t = [x.firstChild.data if x.firstChild else '' for x in d.getElementsByTagName('text')]; \
assert any('a&b<c' in x for x in t) and any(\"d'e\" in x for x in t)" \
  "$WORK/odd/p.svg" || fail "the SVG is not well-formed or lost the name"

# A rank-0 allocation failure (tables far beyond memory) ends every rank with the same error.
set +e
timeout -k 5 120 mpirun -n 2 --oversubscribe "$GRIDFEED" run --data-path corpora/corpus_u16 \
  --split 100,0,0 --seq-length 8 --train-samples 4000000000000000 > "$WORK/oom.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/oom.out"; fail "oom: rc $rc"; }
n=$(grep -c "rank 0 (table build)" "$WORK/oom.out" || true)
[ "$n" -ge 2 ] || { cat "$WORK/oom.out"; fail "oom: not the same error on both ranks"; }
echo "cli faults: ok"
