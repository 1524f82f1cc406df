#!/usr/bin/env bash
# The plots a user reads: `audit accounting --plot` of a blend (named axes, ticks, one line per
# source with its values), no tokens plot for a single source (one source's tokens are the
# run's: the command says so instead of drawing it), and scripts/plot-loss (named axes, ticks,
# the --mark line of a resume).
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/gridfeed_plots.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
COMMON=(--split 100,0,0 --seq-length 64 --train-samples 200 --vocab-size 128256
        --micro-batch-size 2 --global-batch-size 4 --train-iters 10)

mpirun -n 2 --oversubscribe "$GRIDFEED" run --data-path 0.3 corpora/corpus_u16 0.7 \
  corpora/corpus_i32 "${COMMON[@]}" --ledger "$WORK/blend" > "$WORK/blend.out" 2>&1 ||
  { cat "$WORK/blend.out"; fail "blend run"; }
"$GRIDFEED" audit accounting --ledger "$WORK/blend" --plot "$WORK/blend.svg" \
  > "$WORK/blend_acc.out" 2>&1 || { cat "$WORK/blend_acc.out"; fail "blend accounting"; }
/usr/bin/python3 - "$WORK/blend.svg" <<'PY'
import sys, xml.dom.minidom as m
d = m.parse(sys.argv[1])
texts = {t.getAttribute("class"): t.firstChild.data for t in d.getElementsByTagName("text")
         if t.getAttribute("class")}
assert texts.get("x-label") == "iteration", texts
assert "tokens" in texts.get("y-label", ""), texts
lines = d.getElementsByTagName("line")
xt = [l for l in lines if l.getAttribute("class") == "x-tick"]
yt = [l for l in lines if l.getAttribute("class") == "y-tick"]
assert len(xt) >= 3 and len(yt) >= 3, (len(xt), len(yt))
polys = [p for p in d.getElementsByTagName("polyline") if p.getAttribute("data-source")]
assert sorted(p.getAttribute("data-source") for p in polys) == \
    ["corpora/corpus_i32", "corpora/corpus_u16"], [p.getAttribute("data-source") for p in polys]
# The last point of each line is the source's tokens: 40 samples of 64 tokens in all.
last = [int(p.getAttribute("data-values").split()[-1].split(":")[1]) for p in polys]
assert sum(last) == 40 * 64, last
print("blend plot: axes named, ticks, one line per source")
PY

mpirun -n 2 --oversubscribe "$GRIDFEED" run --data-path corpora/corpus_u16 "${COMMON[@]}" \
  --ledger "$WORK/one" > "$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "one-source run"; }
"$GRIDFEED" audit accounting --ledger "$WORK/one" --plot "$WORK/one.svg" > "$WORK/one_acc.out" \
  2>&1 || { cat "$WORK/one_acc.out"; fail "one-source accounting"; }
[ ! -e "$WORK/one.svg" ] || fail "a tokens plot of one source was drawn (it says nothing)"
grep -q "one source" "$WORK/one_acc.out" || { cat "$WORK/one_acc.out"; fail "no word why"; }
echo "one source: no plot, and the command says why"

for i in $(seq 0 29); do printf '%d\t%s\n' "$i" "$((40 - i)).5"; done > "$WORK/loss.tsv"
"$REPO/scripts/plot-loss" "$WORK/loss.tsv" "$WORK/loss.svg" --mark 20=resumed \
  > "$WORK/loss.out" || fail "plot-loss"
grep -q "step    20 .*<- resumed" "$WORK/loss.out" || { cat "$WORK/loss.out"; fail "text mark"; }
/usr/bin/python3 - "$WORK/loss.svg" <<'PY'
import sys, xml.dom.minidom as m
d = m.parse(sys.argv[1])
classes = [e.getAttribute("class") for e in d.getElementsByTagName("*")]
assert "x-label" in classes and "y-label" in classes, classes
assert classes.count("x-tick") >= 3 and classes.count("y-tick") >= 3, classes
marks = [l for l in d.getElementsByTagName("line") if l.getAttribute("class") == "mark"]
assert [l.getAttribute("data-step") for l in marks] == ["20"], marks
print("loss plot: axes named, ticks, the resume marked")
PY
echo "plots_test: ok"
