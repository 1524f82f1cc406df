#!/usr/bin/env bash
# Mixture schedules end to end on the golden corpora: `plan` prints the stage arithmetic and
# the shard figures; a two-stage run with a ramp killed after a checkpoint in the first stage
# and resumed across the stage boundary yields the same ledger as an uninterrupted run (and
# audit verify proves it); an amended schedule is refused without --allow-schedule-change,
# refused when it changes the past (naming the stage, and the source whose tables an epoch
# count change would reshuffle), accepted when it changes only the
# future, and the checkpoint then keeps both schedules with the position each took effect;
# accounting reports the largest share deviation in any window of iterations (recomputed here
# from the records and the schedule's formula) and plots achieved vs target shares; an amended
# run killed and resumed continues in the same ledger, which audit verify proves per schedule,
# and a shifted schedule line fails it.
set -euo pipefail
GRIDFEED=$(realpath "$1")
GOLDEN=$(realpath "$2")
WORK=$(mktemp -d /tmp/gridfeed_mixture.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$GOLDEN"
fail() { echo "FAIL: $*" >&2; exit 1; }
schedule() {  # $1: main mixture, $2: anneal mixture
  cat <<YAML
seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32, multi: corpora/corpus_multi}
schedule:
  - {name: main, samples: 96, mixture: {$1}}
  - {name: anneal, samples: 96, mixture: {$2}, ramp_samples: 32}
max_epochs: {multi: 3}
YAML
}
schedule "u16: 0.6, i32: 0.3, multi: 0.1" "u16: 0.2, i32: 0.3, multi: 0.5" > "$WORK/s.yaml"
schedule "u16: 0.6, i32: 0.3, multi: 0.1" "u16: 0.1, i32: 0.1, multi: 0.8" > "$WORK/future.yaml"
schedule "u16: 0.5, i32: 0.4, multi: 0.1" "u16: 0.2, i32: 0.3, multi: 0.5" > "$WORK/past.yaml"

# plan: the stages, shares and verdicts; --json parses; the shard arithmetic.
"$GRIDFEED" plan --config "$WORK/s.yaml" > "$WORK/plan.txt" || fail "plan"
grep -q "stage 'anneal': samples \[96, 192), ramp over 32 samples" "$WORK/plan.txt" \
  || { cat "$WORK/plan.txt"; fail "plan table"; }
"$GRIDFEED" plan --config "$WORK/s.yaml" --json | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
assert [s["name"] for s in p["stages"]] == ["main", "anneal"], p
main = {c["source"]: c for c in p["stages"][0]["sources"]}
assert abs(main["u16"]["samples"] - 57.6) < 1e-9, main' || fail "plan --json"
"$GRIDFEED" plan shards --shards 100 --ranks 8 --workers 4 | grep -q "78.1%" || fail "plan shards"

F=(--config "$WORK/s.yaml" --micro-batch-size 2 --global-batch-size 16 --train-iters 12)
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/full" \
  > "$WORK/full.out" 2>&1 || { cat "$WORK/full.out"; fail "uninterrupted run"; }
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/cut" --save "$WORK/ck.h5" \
  --save-interval 5 --testing-kill-rank 0 --testing-kill-step 8 > "$WORK/kill.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
cp "$WORK/ck.h5" "$WORK/ck5.h5"
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${F[@]}" --ledger "$WORK/cut" --resume "$WORK/ck.h5" \
  > "$WORK/resume.out" 2>&1 || { cat "$WORK/resume.out"; fail "resume"; }
grep -q "at iteration 5" "$WORK/resume.out" || fail "did not resume at the checkpoint"
for f in "$WORK"/full/dp*.tsv; do
  cmp <(grep -v '^#' "$f") <(grep -v '^#' "$WORK/cut/$(basename "$f")") \
    || fail "ledger $(basename "$f") differs after kill and resume across the stage boundary"
done
"$GRIDFEED" audit verify --ledger "$WORK/cut" > "$WORK/verify.out" 2>&1 \
  || { cat "$WORK/verify.out"; fail "audit verify"; }
echo "kill + resume across the stage boundary: ledger equals the uninterrupted one"

# audit accounting per stage: each stage's per-source counts are the ledger's records counted by
# position against the schedule's boundaries (96 samples per stage), the targets are the written
# weights (anneal: a 32-sample ramp from main's weights), and the plot marks the boundary at
# iteration 96 / 16 = 6.
"$GRIDFEED" audit accounting --ledger "$WORK/full" --window 2 --plot "$WORK/acc.svg" \
  > "$WORK/acc.txt" \
  || { cat "$WORK/acc.txt"; fail "audit accounting"; }
grep -q "stage 'anneal': positions \[96, 192), read \[96, 192) from iteration 6" "$WORK/acc.txt" \
  || { cat "$WORK/acc.txt"; fail "accounting: no per-stage table"; }
"$GRIDFEED" audit accounting --ledger "$WORK/full" --window 2 --json > "$WORK/acc.json" \
  || fail "audit accounting --json"
/usr/bin/python3 - "$WORK" <<'PY' || fail "per-stage accounting"
import glob, json, sys
w = sys.argv[1]
names = ["u16", "i32", "multi"]
counts = [[0, 0, 0], [0, 0, 0]]  # stage -> source -> samples, from the records
first_iteration = [None, None]
for f in glob.glob(f"{w}/full/dp*.tsv"):
    for line in open(f):
        if line.startswith("#") or line.startswith("iteration"):
            continue
        it, _, _, pos, ds = (int(x) for x in line.split("\t")[:5])
        st = 0 if pos < 96 else 1
        counts[st][ds] += 1
        if first_iteration[st] is None or it < first_iteration[st]:
            first_iteration[st] = it
main = {"u16": 0.6, "i32": 0.3, "multi": 0.1}
anneal = {"u16": 0.2, "i32": 0.3, "multi": 0.5}
ramped = {k: (32 * (main[k] + anneal[k]) / 2 + 64 * anneal[k]) / 96 for k in names}
acc = json.load(open(f"{w}/acc.json"))
assert [a["source"] for a in acc] == names, acc
for k, a in enumerate(acc):
    got = [(s["stage"], s["begin"], s["end"], s["samples"], s["tokens"]) for s in a["stages"]]
    want = [("main", 0, 96, counts[0][k], 64 * counts[0][k]),
            ("anneal", 96, 192, counts[1][k], 64 * counts[1][k])]
    assert got == want, (a["source"], got, want)
    for s, c, t in zip(a["stages"], counts, (main, ramped)):
        assert abs(s["share"] - c[k] / sum(c)) < 1e-12, (a["source"], s)
        assert abs(s["target"] - t[a["source"]]) < 1e-9, (a["source"], s, t)
        assert abs(c[k] - 96 * s["target"]) <= 2, (a["source"], s)
assert sum(map(sum, counts)) == 192, counts
assert first_iteration == [0, 6], first_iteration
svg = open(f"{w}/acc.svg").read()
assert svg.count("class='stage-boundary'") == 1 and "anneal (iteration 6)" in svg, svg
# Every stage named where it starts (the first too), both axes named, with ticks.
assert "main (iteration 0)" in svg and "class='x-label'" in svg and "class='y-label'" in svg, svg
assert svg.count("class='x-tick'") >= 3 and svg.count("class='y-tick'") >= 3, svg
print("per-stage accounting: counts, shares and targets match the ledger and the schedule")
PY
# --until-step 6 counts the main stage only (positions [0, 96)): the target printed next to the
# share is main's weights there, not the whole run's (which the anneal's ramp moves).
"$GRIDFEED" audit accounting --ledger "$WORK/full" --until-step 6 --json > "$WORK/until.json" \
  || fail "audit accounting --until-step"
"$GRIDFEED" audit accounting --ledger "$WORK/full" --until-step 6 > "$WORK/until.txt" \
  || fail "audit accounting --until-step (text)"
/usr/bin/python3 - "$WORK/until.json" "$WORK/until.txt" <<'PY' || fail "accounting --until-step target"
import json, sys
main = {"u16": 0.6, "i32": 0.3, "multi": 0.1}
anneal = {"u16": 0.2, "i32": 0.3, "multi": 0.5}
top = open(sys.argv[2]).read().split("\nstage ")[0]  # the table before the per-stage ones
rows = {l.split()[0]: l.split() for l in top.splitlines() if l.split() and l.split()[0] in main}
assert len(rows) == 3, top
for a in json.load(open(sys.argv[1])):
    k = a["source"]
    whole = (96 * main[k] + 32 * (main[k] + anneal[k]) / 2 + 64 * anneal[k]) / 192
    assert abs(a["target"] - main[k]) < 1e-9, (k, a)
    assert abs(a["target_weight"] - whole) < 1e-9, (k, a, whole)
    assert abs(float(rows[k][1]) - main[k]) < 1e-4, (k, rows[k])
    assert abs(a["share"] - main[k]) < 0.05, (k, a)
print("accounting --until-step: the target up to that step next to the share")
PY
/usr/bin/python3 - "$WORK/full" "$WORK/acc.json" "$WORK/acc.svg" \
  "u16: 0.6, i32: 0.3, multi: 0.1" "u16: 0.2, i32: 0.3, multi: 0.5" <<'PY' || fail "windows"
import glob, json, re, sys
ledger, acc_json, svg_path = sys.argv[1:4]
names = ["u16", "i32", "multi"]
weights = [dict((k.strip(), float(v)) for k, v in (p.split(":") for p in m.split(",")))
           for m in sys.argv[4:6]]
main, anneal = ([w[k] for k in names] for w in weights)
W = 2
def T(k, q):  # cumulative target: main constant, anneal ramps linearly over 32 samples
    if q <= 96:
        return main[k] * q
    x, r = q - 96, 32
    if x <= r:
        return main[k] * 96 + main[k] * x + (anneal[k] - main[k]) * x * x / (2 * r)
    return main[k] * 96 + (main[k] + anneal[k]) * r / 2 + anneal[k] * (x - r)
reads = [{}, {}]  # stage -> iteration -> [begin, end, counts]
for f in glob.glob(f"{ledger}/dp*.tsv"):
    for line in open(f):
        if line.startswith("#") or line.startswith("iteration"):
            continue
        it, _, _, pos, ds = (int(x) for x in line.split("\t")[:5])
        r = reads[0 if pos < 96 else 1].setdefault(it, [pos, pos + 1, [0, 0, 0]])
        r[0], r[1] = min(r[0], pos), max(r[1], pos + 1)
        r[2][ds] += 1
acc = json.load(open(acc_json))
svg = open(svg_path).read()
lines = {(m[0], m[1], m[2]): [tuple(map(float, v.split(":"))) for v in m[3].split()]
         for m in re.findall(r"<polyline class='(achieved|target)' data-source='([^']*)' "
                             r"data-stage='([^']*)' data-values='([^']*)'", svg)}
largest = 0
for st, name in enumerate(["main", "anneal"]):
    its = sorted(reads[st])
    n = len(its)
    for k, src in enumerate(names):
        best, series = None, []
        for e in range(n):
            s = max(0, e - W + 1)
            win = [reads[st][i] for i in its[s:e + 1]]
            a, b = min(w[0] for w in win), max(w[1] for w in win)
            share = sum(w[2][k] for w in win) / sum(sum(w[2]) for w in win)
            target = (T(k, b) - T(k, a)) / (b - a)
            series.append((its[e], share, target))
            if (e - s + 1 == W or (n < W and e == n - 1)) and \
                    (best is None or abs(share - target) > best):
                best = abs(share - target)
        got = [g for g in acc[k]["stages"] if g["stage"] == name][0]
        assert got["window"] == W, got
        assert abs(got["max_window_deviation"]["deviation"] - best) < 1e-9, (src, name, got, best)
        largest = max(largest, best)
        for cls, col in (("achieved", 1), ("target", 2)):
            drawn = lines[(cls, src, name)]
            assert len(drawn) == n, (cls, src, name, drawn)
            for (it, v), want in zip(drawn, series):
                assert it == want[0] and abs(v - want[col]) < 1e-9, (cls, src, name, it, v, want)
assert largest > 0, "no window deviates: the check would prove nothing"
print(f"windows of {W} iterations: largest deviations and plotted shares match (max {largest:.4f})")
PY

# Amendments, resumed from the checkpoint at iteration 5 (sample 80, stage 'main').
A=(--micro-batch-size 2 --global-batch-size 16 --train-iters 12 --save "$WORK/amended.h5")
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/future.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" > "$WORK/noflag.out" 2>&1; then
  fail "a changed schedule resumed without --allow-schedule-change"
fi
grep -q "allow-schedule-change" "$WORK/noflag.out" || { cat "$WORK/noflag.out"; fail "message"; }
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/past.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/past.out" 2>&1; then
  fail "an amendment that changes the past was accepted"
fi
grep -q "stage 'main'" "$WORK/past.out" || { cat "$WORK/past.out"; fail "past: stage not named"; }
# A longer anneal that draws multi past one epoch: its tables would be reshuffled (named).
sed -e 's/{name: anneal, samples: 96, mixture: {[^}]*}/{name: anneal, samples: 3000, mixture: {u16: 0.05, i32: 0.05, multi: 0.9}/' \
  "$WORK/s.yaml" > "$WORK/epochs.yaml"
grep -q "samples: 3000" "$WORK/epochs.yaml" || fail "epochs.yaml"
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/epochs.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/epochs.out" 2>&1; then
  fail "an amendment that reshuffles a source was accepted"
fi
grep -q "source 'multi' is reshuffled: its tables hold 1 epoch(s) under the saved schedule, 2 under" \
  "$WORK/epochs.out" || { cat "$WORK/epochs.out"; fail "epochs: source not named"; }
# Only the sources' order changed: said so, not "the token files changed".
sed -e 's/^sources: .*/sources: {i32: corpora\/corpus_i32, u16: corpora\/corpus_u16, multi: corpora\/corpus_multi}/' \
  "$WORK/s.yaml" > "$WORK/reorder.yaml"
grep -q "^sources: {i32" "$WORK/reorder.yaml" || fail "reorder.yaml"
if mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/reorder.yaml" "${A[@]}" \
     --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/reorder.out" 2>&1; then
  fail "a resume with reordered sources was accepted"
fi
grep -q "reorders the sources (saved: u16, i32, multi; now: i32, u16, multi)" "$WORK/reorder.out" \
  || { cat "$WORK/reorder.out"; fail "reorder: not named"; }
if grep -q "token files changed" "$WORK/reorder.out"; then fail "reorder: token files changed"; fi
mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/future.yaml" "${A[@]}" \
  --resume "$WORK/ck5.h5" --allow-schedule-change > "$WORK/future.out" 2>&1 \
  || { cat "$WORK/future.out"; fail "a future-only amendment was refused"; }
h5dump -a /gridfeed/schedule_history "$WORK/amended.h5" > "$WORK/history.txt"
grep -q '"position":80,' "$WORK/history.txt" || { cat "$WORK/history.txt"; fail "history"; }
grep -q '"position":0,' "$WORK/history.txt" || { cat "$WORK/history.txt"; fail "history"; }

# The amended run continues in the killed run's ledger: killed after its checkpoint at
# iteration 8, resumed (the amendment now in its checkpoint), then verified per schedule.
cp -r "$WORK/cut" "$WORK/amend"
B=(--config "$WORK/future.yaml" --micro-batch-size 2 --global-batch-size 16 --train-iters 12
   --ledger "$WORK/amend" --save "$WORK/amend.h5" --save-interval 2)
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${B[@]}" --resume "$WORK/ck5.h5" \
  --allow-schedule-change --testing-kill-rank 0 --testing-kill-step 9 > "$WORK/amend1.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the killed amended run exited 0"
grep -q "amended mixture schedule from sample 80" "$WORK/amend1.out" \
  || { cat "$WORK/amend1.out"; fail "not amended"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${B[@]}" --resume "$WORK/amend.h5" \
  > "$WORK/amend2.out" 2>&1 || { cat "$WORK/amend2.out"; fail "resume of the amended run"; }
grep -q "at iteration 8" "$WORK/amend2.out" || { cat "$WORK/amend2.out"; fail "resume point"; }
for f in "$WORK"/amend/dp*.tsv; do
  head -1 "$f" | grep -qx "# gridfeed ledger v3" || fail "$(basename "$f"): not version 3"
  [ "$(grep -c '^# schedule position=80 ' "$f")" = 1 ] || fail "$(basename "$f"): schedule lines"
  # Positions before the amendment are the original run's records.
  cmp <(awk -F'\t' '!/^#/ && $4 < 80' "$f") \
      <(awk -F'\t' '!/^#/ && $4 < 80' "$WORK/full/$(basename "$f")") \
    || fail "$(basename "$f"): the records before the amendment changed"
done
"$GRIDFEED" audit verify --ledger "$WORK/amend" > "$WORK/verify_amend.out" 2>&1 \
  || { cat "$WORK/verify_amend.out"; fail "audit verify of the amended ledger"; }
grep -q "under 2 mixture schedules" "$WORK/verify_amend.out" \
  || { cat "$WORK/verify_amend.out"; fail "verify: schedules"; }
grep -q "positions \[0, 192) consumed exactly once; each source's stream read exactly once" \
  "$WORK/verify_amend.out" || { cat "$WORK/verify_amend.out"; fail "verify: streams"; }
# Replay of the amended ledger, by its own segments and with the geometry given as flags: each
# position under the schedule in force there, so both print the ledger's records.
sort_records() { grep -v '^#' | grep -v '^iteration' | sort -n -k1,1 -k3,3 -k2,2; }
cat "$WORK"/amend/dp*.tsv | sort_records > "$WORK/amend_records.txt"
"$GRIDFEED" audit replay --ledger "$WORK/amend" --steps 0:12 | sort_records \
  > "$WORK/replay_own.txt" || fail "replay of the amended ledger"
cmp "$WORK/replay_own.txt" "$WORK/amend_records.txt" || fail "replay by segments != ledger"
"$GRIDFEED" audit replay --ledger "$WORK/amend" --steps 0:12 --data-parallel-size 4 \
  --micro-batch-size 2 --global-batch-size 16 | sort_records > "$WORK/replay_flags.txt" \
  || fail "replay of the amended ledger with geometry flags"
cmp "$WORK/replay_flags.txt" "$WORK/amend_records.txt" \
  || fail "replay with geometry flags ignores the amendment (differs from the ledger)"
# The anneal stage's targets are the amendment's (a 32-sample ramp to u16 0.1, i32 0.1, multi 0.8).
"$GRIDFEED" audit accounting --ledger "$WORK/amend" --json > "$WORK/amend.json" \
  || fail "accounting of the amended ledger"
/usr/bin/python3 - "$WORK/amend.json" <<'PY' || fail "amended accounting targets"
import json, sys
main = {"u16": 0.6, "i32": 0.3, "multi": 0.1}
anneal = {"u16": 0.1, "i32": 0.1, "multi": 0.8}
for a in json.load(open(sys.argv[1])):
    k = a["source"]
    want = [main[k], (32 * (main[k] + anneal[k]) / 2 + 64 * anneal[k]) / 96]
    got = [s["target"] for s in a["stages"]]
    assert all(abs(g - w) < 1e-9 for g, w in zip(got, want)), (k, got, want)
PY
# Tampering: the schedule line moved to position 64 (or 96) no longer matches who read what.
for moved in 64 96; do
  rm -rf "$WORK/shifted" && cp -r "$WORK/amend" "$WORK/shifted"
  sed -i "s/^# schedule position=80 /# schedule position=$moved /" "$WORK"/shifted/dp*.tsv
  if "$GRIDFEED" audit verify --ledger "$WORK/shifted" > "$WORK/shifted.out" 2>&1; then
    fail "a schedule line shifted to $moved passed audit verify"
  fi
  grep -q "governs it" "$WORK/shifted.out" || { cat "$WORK/shifted.out"; fail "shift message"; }
done
echo "amended run: one ledger across kill, resume and amendment, verified per schedule"

# A long-context stage: 128-token samples after 64-token ones, under PP 2 x DP 2 (a middle rank
# knows the length too: run checks TP peers and DP coverage). The ledger's records are each
# stage's length (their token hash over that many tokens is recomputed by audit verify, per
# source and length stream), accounting counts tokens at each stage's length, plan shows it,
# and a length change off the global batches is refused naming the stage.
long_schedule() {  # $1: main samples
  cat <<YAML
seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32, multi: corpora/corpus_multi}
schedule:
  - {name: main, samples: $1, mixture: {u16: 0.5, i32: 0.3, multi: 0.2}}
  - {name: long, samples: 64, seq_length: 128, mixture: {u16: 0.2, i32: 0.3, multi: 0.5}, ramp_samples: 16}
YAML
}
long_schedule 64 > "$WORK/long.yaml"
long_schedule 72 > "$WORK/off.yaml"
"$GRIDFEED" plan --config "$WORK/long.yaml" > "$WORK/long_plan.txt" || fail "plan (long stage)"
grep -q "stage 'long': samples \[64, 128), seq_length 128, ramp over 16 samples" \
  "$WORK/long_plan.txt" || { cat "$WORK/long_plan.txt"; fail "plan: the stage's length"; }
L=(--micro-batch-size 2 --global-batch-size 16 --pipeline-model-parallel-size 2 --train-iters 8)
mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/long.yaml" "${L[@]}" \
  --ledger "$WORK/long" --dump "$WORK/long_dump" > "$WORK/long.out" 2>&1 \
  || { cat "$WORK/long.out"; fail "long run"; }
/usr/bin/python3 - "$WORK/long_dump" <<'PY' || fail "dump of a run with two lengths"
import json, sys
import numpy as np
d = sys.argv[1]
for r in range(4):  # PP 2 x DP 2: every rank is a first- or last-stage reader
    meta = json.load(open(f"{d}/rank{r}/meta.json"))
    assert meta["ragged"] is True, meta
    lengths = np.load(f"{d}/rank{r}/local_seq_lengths.npy")
    assert list(lengths) == [64] * 16 + [128] * 16, lengths  # 4 iterations of 4 each
    field = "tokens" if "tokens" in meta["fields"] else "labels"
    assert np.load(f"{d}/rank{r}/{field}.npy").size == 2 * lengths.sum(), (r, field)
print("dump: micro-batches of two lengths written flat with their lengths")
PY
"$GRIDFEED" audit verify --ledger "$WORK/long" > "$WORK/long_verify.out" 2>&1 \
  || { cat "$WORK/long_verify.out"; fail "audit verify (long stage)"; }
grep -q "each source's stream read exactly once: u16 at 64 tokens \[0, [0-9]*) u16 at 128 tokens" \
  "$WORK/long_verify.out" || { cat "$WORK/long_verify.out"; fail "verify: streams per length"; }
"$GRIDFEED" audit accounting --ledger "$WORK/long" --json > "$WORK/long_acc.json" \
  || fail "audit accounting (long stage)"
/usr/bin/python3 - "$WORK/long" "$WORK/long_acc.json" <<'PY' || fail "long-stage accounting"
import glob, json, sys
ledger, acc_path = sys.argv[1:3]
counts = [[0, 0, 0], [0, 0, 0]]
for f in glob.glob(f"{ledger}/dp*.tsv"):
    for line in open(f):
        if line.startswith("#") or line.startswith("iteration"):
            continue
        pos, ds = (int(x) for x in line.split("\t")[3:5])
        counts[0 if pos < 64 else 1][ds] += 1
assert sum(map(sum, counts)) == 128, counts
acc = json.load(open(acc_path))
for k, a in enumerate(acc):
    assert a["samples"] == counts[0][k] + counts[1][k], (a, counts)
    assert a["tokens"] == 64 * counts[0][k] + 128 * counts[1][k], (a, counts)
    got = [(s["stage"], s["samples"], s["tokens"]) for s in a["stages"]]
    assert got == [("main", counts[0][k], 64 * counts[0][k]),
                   ("long", counts[1][k], 128 * counts[1][k])], (got, counts)
print("long-context stage: ledger, verify and accounting agree on each stage's length")
PY
set +e
mpirun -n 4 --oversubscribe "$GRIDFEED" run --config "$WORK/off.yaml" "${L[@]}" \
  > "$WORK/off.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a length change off the global batches was accepted"
grep -q "schedule\[1\] (.long.) reads 128 tokens per sample" "$WORK/off.out" \
  || { cat "$WORK/off.out"; fail "the misaligned stage is not named"; }
# Offline samples of a schedule in iterations follow the batch flags (16 a batch: the long stage
# starts at sample 32).
sed -e 's/samples: 64, mixture: {u16: 0.5/iterations: 2, mixture: {u16: 0.5/' \
    -e 's/samples: 64, seq_length: 128/iterations: 2, seq_length: 128/' "$WORK/long.yaml" > "$WORK/it.yaml"
grep -q "iterations: 2, seq_length: 128" "$WORK/it.yaml" || fail "it.yaml"
"$GRIDFEED" samples --config "$WORK/it.yaml" --global-batch-size 16 --positions 32:36 \
  --out "$WORK/it_samples" > /dev/null 2>&1 || fail "samples with --global-batch-size"
/usr/bin/python3 -c 'import numpy as np, sys; s = np.load(sys.argv[1]).shape; assert s == (4, 128), s' \
  "$WORK/it_samples/tokens.npy" || fail "samples of the long stage are not 128 tokens"

# Resumes with another global batch size: past the change of length any size goes (checkpoint at
# sample 64, resumed at 24 a batch); before it, one whose batches would straddle it is refused
# on every rank naming the stage (checkpoint at 48, resumed at 32 a batch: 48 + 32 > 64).
LS=(--config "$WORK/long.yaml" --micro-batch-size 2 --pipeline-model-parallel-size 2)
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${LS[@]}" --global-batch-size 16 --train-iters 4 \
  --save "$WORK/long64.h5" > "$WORK/long64.out" 2>&1 || { cat "$WORK/long64.out"; fail "run to 64"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${LS[@]}" --global-batch-size 24 --train-iters 6 \
  --resume "$WORK/long64.h5" --allow-batch-size-change > "$WORK/long64r.out" 2>&1 \
  || { cat "$WORK/long64r.out"; fail "a resume past the change of length was refused"; }
mpirun -n 4 --oversubscribe "$GRIDFEED" run "${LS[@]}" --global-batch-size 16 --train-iters 3 \
  --save "$WORK/long48.h5" > "$WORK/long48.out" 2>&1 || { cat "$WORK/long48.out"; fail "run to 48"; }
if mpirun -n 4 --oversubscribe "$GRIDFEED" run "${LS[@]}" --global-batch-size 32 --train-iters 4 \
     --resume "$WORK/long48.h5" --allow-batch-size-change > "$WORK/long48r.out" 2>&1; then
  fail "a resume whose batches straddle the change of length was accepted"
fi
grep -q "schedule\[1\] (.long.) reads 128 tokens per sample from sample 64" "$WORK/long48r.out" \
  || { cat "$WORK/long48r.out"; fail "straddling resume: stage not named"; }
echo "long-context stage: runs, verifies and accounts at its own length"
echo "cli mixture: ok"
