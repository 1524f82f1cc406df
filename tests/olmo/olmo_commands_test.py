"""gridfeed's commands on OLMo configurations against vectors produced by OLMo's own code.

  olmo_commands_test.py GRIDFEED GOLDEN_OLMO_DIR

Checks, each against the golden cases (never against gridfeed's own output):
  tables  - global_indices.npy and summary.json (iter cases over token files, global_indices/*
            through token files of one-token instances), an empty order is a clear error;
  samples - every field of dataset[i] for the memmap cases built from a training config and
            the direct MemMapDataset cases (arrays), out-of-range indices are errors;
  run     - under mpirun at the cases' world sizes (1, 2, 3, 4) and every recorded
            data.num_workers: each rank's sample_indices are its DataLoader's batches over
            epochs (leftover order included); tokens, labels and loss masks of the full-tensor
            case equal OLMo's collated batches; micro-batches smaller than the device batch
            give the same stream; --consumed-samples restarts as OLMo's start_index;
  resume  - a run killed after a checkpoint and resumed gives the uninterrupted ledger across
            an epoch boundary, audit verify accepts it, a DP change is refused;
  config  - unknown data.* keys and paths+datasets are errors naming the key.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

GRIDFEED = os.path.abspath(sys.argv[1])
GOLDEN = os.path.abspath(sys.argv[2])
os.chdir(GOLDEN)  # the cases' paths are relative to the golden folder, as OLMo saw them
WORK = tempfile.mkdtemp(prefix="gridfeed_olmo_")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")
checked = {"tables": 0, "samples": 0, "run": 0, "resume": 0, "config": 0}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def sh(args, expect_ok=True, what="", stdout_only=False):
    p = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=300)
    if expect_ok and p.returncode != 0:
        fail(f"{what}: {' '.join(args)}\n{p.stdout}\n{p.stderr}")
    if not expect_ok and p.returncode == 0:
        fail(f"{what}: succeeded but should fail: {' '.join(args)}")
    return p.stdout if stdout_only else p.stdout + p.stderr


n_cfg = 0


def config_file(cfg):
    """JSON is YAML: the configuration exactly as an OLMo user writes it."""
    global n_cfg
    n_cfg += 1
    path = os.path.join(WORK, f"c{n_cfg}.yaml")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def load(case_kind, name):
    with open(f"cases/{case_kind}/{name}/case.json") as f:
        return json.load(f)


def train_config_from_memmap_call(call):
    """A training config that makes build_memmap_dataset build what `call` built."""
    if "function" in call:
        cfg = {"model": dict(call["model"]), "data": dict(call["data_config"])}
        if cfg["data"].get("instance_filter") == "default":
            cfg["data"]["instance_filter"] = {}
        return cfg, True
    kw = call["kwargs"]
    model = {"max_sequence_length": kw.get("chunk_size", 1024)}
    for k in ("pad_token_id", "eos_token_id"):
        if kw.get(k) is not None:
            model[k] = kw[k]
    data = {"paths": call["paths"], "memmap_dtype": kw.get("memmap_dtype", "uint16")}
    for k in ("generate_attention_mask", "generate_doc_lengths", "label_mask_paths"):
        if kw.get(k) is not None:
            data[k] = kw[k]
    if kw.get("instance_filter_config") is not None:
        data["instance_filter"] = kw["instance_filter_config"]
    return {"model": model, "data": data}, False


# ---------------------------------------------------------------- tables
def check_tables(cfg, world, want, what, want_total=None, want_device=None):
    path = config_file(cfg)
    out = os.path.join(WORK, f"t{n_cfg}")
    dp = [] if world is None else ["--data-parallel-size", str(world)]
    sh([GRIDFEED, "tables", "--config", path, "--out", out] + dp, what=what)
    got = np.load(os.path.join(out, "global_indices.npy"))
    if got.dtype != np.uint32:
        fail(f"{what}: global_indices dtype {got.dtype}, OLMo writes uint32")
    if not np.array_equal(got, np.asarray(want, dtype=np.uint32)):
        fail(f"{what}: global order differs: {got[:12]} vs {np.asarray(want)[:12]}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    if want_total is not None and s["total_size"] != want_total:
        fail(f"{what}: total_size {s['total_size']} != {want_total}")
    if want_device is not None and s["device_batch_size"] != want_device:
        fail(f"{what}: device_batch_size {s['device_batch_size']} != {want_device}")
    checked["tables"] += 1


# Every iter case over a real MemMapDataset (training always shuffles, start 0, no cap).
for name in sorted(os.listdir("cases/iter")):
    c = load("iter", name)
    p = c["params"]
    if c["dataset"].get("type") != "MemMapDataset" or not p["shuffle"] or p["start_index"] \
            or p["max_examples"] is not None:
        continue
    cfg, _ = train_config_from_memmap_call(c["dataset"]["olmo_call"])
    # No device_train_microbatch_size: OLMo's default 16 need not divide the device batch.
    cfg.update(seed=p["seed"], epoch=p["epoch"], global_train_batch_size=p["global_batch_size"])
    cfg["data"]["drop_last"] = p["drop_last"]
    check_tables(cfg, p["world_size"], c["global_indices"], f"tables iter/{name}",
                 p["total_size"], p["device_batch_size"])
    # OLMo's device_train_batch_size (global / W) tells the DP size when no flag does.
    cfg["device_train_batch_size"] = p["device_batch_size"]
    check_tables(cfg, None, c["global_indices"], f"tables iter/{name}, DP from the device batch",
                 p["total_size"], p["device_batch_size"])


def one_token_instances(n):
    """A token file of n one-token instances: OLMo's order only sees the length."""
    path = os.path.join(WORK, f"n{n}.npy")
    if not os.path.exists(path):
        np.zeros(n, dtype="<u2").tofile(path)
    return path


for group in ("seeds_and_sizes", "small_grid", "seed_plus_epoch"):
    for e in load("global_indices", group)["entries"]:
        seed = int(e["seed"])  # any size: OLMo seeds numpy's SeedSequence with a Python int
        if not e["shuffle"]:
            continue  # training always shuffles
        cfg = {"seed": seed, "epoch": e["epoch"], "global_train_batch_size": e["global_batch_size"],
               "model": {"max_sequence_length": 1},
               "data": {"paths": [one_token_instances(e["dataset_len"])], "drop_last": e["drop_last"]}}
        what = f"tables {group} N={e['dataset_len']} seed={seed} epoch={e['epoch']} W={e['world_size']}"
        if e["total_size"] == 0:
            out = sh([GRIDFEED, "tables", "--config", config_file(cfg), "--data-parallel-size",
                      str(e["world_size"]), "--out", os.path.join(WORK, "empty")], False, what)
            if "global order is empty" not in out:
                fail(f"{what}: the error does not say the order is empty: {out}")
            checked["tables"] += 1
            continue
        want = e["values"] if "values" in e else np.load(
            os.path.join("cases/global_indices", group, e["file"]))
        check_tables(cfg, e["world_size"], want, what, e["total_size"], e["device_batch_size"])

# numpy's Generator(PCG64(seed)).shuffle(arange(n)) for the rng units' seeds (up to 141 bits)
# as an OLMo YAML gives them: one rank, epoch 0, one-token instances, global batch 1.
for e in load("rng", "pcg64_units")["entries"]:
    for n, sh_ in e["shuffles"].items():
        want = sh_["values"] if "values" in sh_ else np.load(
            os.path.join("cases/rng/pcg64_units", sh_["file"]))
        cfg = {"seed": int(e["seed"]), "global_train_batch_size": 1,
               "model": {"max_sequence_length": 1}, "data": {"paths": [one_token_instances(int(n))]}}
        check_tables(cfg, 1, want, f"tables rng seed {e['seed']} ({e['seed_bits']} bits) n={n}")

big_seeds = [int(e["seed"]) for g in ("seeds_and_sizes",) for e in load("global_indices", g)["entries"]
             if e["shuffle"] and int(e["seed"]) >= 2**128]
if not big_seeds:
    fail("no golden order with a seed of 2^128 or more")

# ---------------------------------------------------------------- samples
for name in sorted(os.listdir("cases/memmap")):
    c = load("memmap", name)
    cfg, from_config = train_config_from_memmap_call(c["olmo_call"])
    idx = c["items"]["item_indices"]
    out = os.path.join(WORK, f"s_{name}")
    spec = ",".join(str(i) for i in idx)
    sh([GRIDFEED, "samples", "--config", config_file(cfg), "--positions", spec, "--out", out],
       what=f"samples {name}")
    items = f"cases/memmap/{name}/items"
    for f in sorted(os.listdir(items)):
        want = np.load(os.path.join(items, f))
        if not os.path.exists(os.path.join(out, f)):
            fail(f"samples {name}: {f} missing")
        got = np.load(os.path.join(out, f))
        if got.dtype != want.dtype or not np.array_equal(got, want):
            fail(f"samples {name}: {f} differs ({got.dtype} {got.shape} vs {want.dtype} {want.shape})")
    if from_config:
        with open(os.path.join(out, "metadata.json")) as f:
            if json.load(f) != c["items"]["metadata"]:
                fail(f"samples {name}: metadata differs")
    for err in c.get("index_errors", []):
        i = err["index"] if isinstance(err, dict) else err
        o = sh([GRIDFEED, "samples", "--config", config_file(cfg), "--positions", str(i), "--out",
                out + "_err"], False, f"samples {name} index {i}")
        if "out of bounds" not in o:
            fail(f"samples {name}: index {i}: {o}")
    checked["samples"] += 1


# ---------------------------------------------------------------- run under mpirun
def rank_streams(run):
    """A rank's DataLoader batches over its epochs (restarts excluded), flattened."""
    stream = []
    for ep in run["epochs"]:
        if ep["start_index"] == 0:
            for b in ep["batches"]:
                stream += b["index"]
    return stream


def olmo_chunk(mbs, B):
    """The micro-batch the feeder reads for OLMo's chunks of at most mbs of a device batch B:
    the whole batch when it fits, mbs when it divides B, else gcd(mbs, B) (OLMo's last chunk
    is smaller; the feeder's micro-batches are one size, and every chunk boundary is kept)."""
    return B if mbs >= B else (mbs if B % mbs == 0 else math.gcd(mbs, B))


def run_case(name, workers, micro=None, consumed=0, want_streams=None):
    """`micro` None: the YAML has no device_train_microbatch_size (OLMo's default 16)."""
    c = load("dataloader", name)
    W = c["world_size"]
    cfg = json.loads(json.dumps(c["train_config"]))
    if cfg["data"].get("instance_filter") == "default":
        cfg["data"]["instance_filter"] = {}
    cfg["data"]["num_workers"] = workers
    B = cfg["device_train_batch_size"]
    if micro is not None:
        cfg["device_train_microbatch_size"] = micro
    mbs = olmo_chunk(16 if micro is None else micro, B)
    runs = {r["rank"]: r for r in c["runs"] if r["num_workers"] == workers}
    streams = want_streams or [rank_streams(runs[r]) for r in range(W)]
    GB = B * W
    # Global batches until the golden epochs are covered: the last one reaches into the next
    # epoch, so a partial tail's order is fed (and compared) too.
    first = 0 if want_streams else consumed // W
    steps = -(-(min(len(s) for s in streams) - first) // B)
    iters = steps  # run counts iterations from 0 after --consumed-samples
    out = os.path.join(WORK, f"run_{name}_{workers}_{mbs}_{consumed}")
    args = ["mpirun", "-n", str(W), "--oversubscribe", GRIDFEED, "run", "--config",
            config_file(cfg), "--train-iters", str(iters), "--dump", out]
    if consumed:
        args += ["--consumed-samples", str(consumed)]
    sh(args, what=f"run {name} K={workers}")
    for r in range(W):
        got = np.load(f"{out}/rank{r}/sample_indices.npy")
        if got.dtype != np.int64 or got.shape[1] != mbs:
            fail(f"run {name}: sample_indices {got.dtype} {got.shape}, micro-batch {mbs}")
        want = np.array(streams[r][first:first + got.size], dtype=np.int64)
        if got.size != steps * B or not np.array_equal(got.reshape(-1)[:want.size], want):
            fail(f"run {name} K={workers} mbs={mbs} consumed={consumed} rank {r}: "
                 f"{got.reshape(-1)[:16]} vs {want[:16]}")
    checked["run"] += 1
    return c, out, runs


for name in sorted(os.listdir("cases/dataloader")):
    for K in sorted({r["num_workers"] for r in load("dataloader", name)["runs"]}):
        c, out, runs = run_case(name, K)

DATALOADER = sorted(os.listdir("cases/dataloader"))
# Micro-batches of one sample, and of the whole device batch: the same stream.
for name in DATALOADER:
    c = load("dataloader", name)
    K = max(r["num_workers"] for r in c["runs"])
    run_case(name, K, micro=1)
    run_case(name, K, micro=c["train_config"]["device_train_batch_size"])
# A restart at start_index s of epoch e is --consumed-samples (e - first epoch) x total_size + s
# (no drop_last): every restart of the golden DataLoaders, with its workers, whether or not s
# is a multiple of the world size or of the global batch; rank r then reads OLMo's restarted
# DataLoader, g[s:][r::W] dealt to the workers anew.
restarts = 0
for name in DATALOADER:
    c = load("dataloader", name)
    W = c["world_size"]
    if c["train_config"]["data"].get("drop_last"):
        continue
    for K in sorted({r["num_workers"] for r in c["runs"]}):
        by_rank = {r["rank"]: r for r in c["runs"] if r["num_workers"] == K}
        first = by_rank[0]["epochs"][0]["epoch"]
        for i, ep in enumerate(by_rank[0]["epochs"]):
            s = ep["start_index"]
            if not s:
                continue
            consumed = (ep["epoch"] - first) * by_rank[0]["total_size"] + s
            want = [[x for b in by_rank[r]["epochs"][i]["batches"] for x in b["index"]]
                    for r in range(W)]
            for micro in (None, 1):
                run_case(name, K, micro=micro, consumed=consumed, want_streams=want)
                restarts += 1
if restarts == 0:
    fail("no golden DataLoader restart")


# OLMo's iterable dataset restarted at start_index (iter cases over range(N): one-token
# instances, so instance i is i), in the main process and with its DataLoader workers.
def worker_batches(lists, B):
    """torch's DataLoader order over its workers' streams: batch j of every worker, in turn."""
    out, j = [], 0
    while any(j * B < len(w) for w in lists):
        for w in lists:
            out += w[j * B:(j + 1) * B]
        j += 1
    return out


for name in sorted(os.listdir("cases/iter")):
    c = load("iter", name)
    p = c["params"]
    if c["dataset"].get("type") != "range" or not p["start_index"] or \
            p["max_examples"] is not None or not p["shuffle"]:
        continue
    W, B, s = p["world_size"], p["device_batch_size"], p["start_index"]
    for K in [0] + sorted(int(k) for k in c["ranks"][0]["workers"]):
        cfg = {"seed": p["seed"], "epoch": p["epoch"], "global_train_batch_size": p["global_batch_size"],
               "model": {"max_sequence_length": 1},
               "data": {"paths": [one_token_instances(c["dataset"]["len"])],
                        "drop_last": p["drop_last"], "num_workers": K}}
        want = [r["main_process"] if K == 0 else worker_batches(r["workers"][str(K)], B)
                for r in sorted(c["ranks"], key=lambda r: r["rank"])]
        iters = -(-max(len(x) for x in want) // B)
        out = os.path.join(WORK, f"iter_{name}_{K}")
        sh(["mpirun", "-n", str(W), "--oversubscribe", GRIDFEED, "run", "--config",
            config_file(cfg), "--train-iters", str(iters), "--consumed-samples", str(s),
            "--dump", out], what=f"iter {name} K={K}")
        for r in range(W):
            got = np.load(f"{out}/rank{r}/sample_indices.npy").reshape(-1)
            if not np.array_equal(got[:len(want[r])], want[r]):
                fail(f"iter {name} K={K}: restart at {s}, rank {r}: {got[:8]} vs {want[r][:8]}")
        checked["run"] += 1
# audit verify rebuilds the restarted order of a ledger written after --consumed-samples.
ledger = os.path.join(WORK, "restart_ledger")
sh(["mpirun", "-n", "2", "--oversubscribe", GRIDFEED, "run", "--config", config_file(
    {"seed": 5, "global_train_batch_size": 8, "model": {"max_sequence_length": 1},
     "data": {"paths": [one_token_instances(50)], "num_workers": 2}}),
    "--train-iters", "5", "--consumed-samples", "7", "--ledger", ledger], what="restart ledger")
# Its proof covers the positions from the restart point on, when told (--from 7): [7, 47).
v = subprocess.run([GRIDFEED, "audit", "verify", "--ledger", ledger, "--from", "7"], env=ENV,
                   capture_output=True, text=True, timeout=300)
out = v.stdout + v.stderr
if v.returncode != 0 or "positions [7, 47) consumed exactly once" not in out:
    fail("audit verify does not prove a restarted OLMo ledger from its restart point: " + out)
checked["run"] += 1

# The fields of the full-tensor cases: OLMo's collated batches.
for name in DATALOADER:
  c = load("dataloader", name)
  with_dirs = [r for r in c["runs"] if any("dir" in b for e in r["epochs"] for b in e["batches"])]
  if not with_dirs:
    continue
  K = with_dirs[0]["num_workers"]
  c, out, runs = run_case(name, K)
  W = c["world_size"]
  for r in range(W):
      tokens = np.load(f"{out}/rank{r}/tokens.npy")
      labels = np.load(f"{out}/rank{r}/labels.npy")
      loss = np.load(f"{out}/rank{r}/loss_mask.npy")
      for j, b in enumerate(runs[r]["epochs"][0]["batches"]):
          if "dir" not in b or b["size"] != tokens.shape[1]:
              continue
          d = os.path.join("cases/dataloader", name, b["dir"])
          ids = np.load(f"{d}/input_ids.npy")
          if not np.array_equal(tokens[j], ids):
              fail(f"run fields: rank {r} batch {j}: tokens differ from OLMo's input_ids")
          keep = np.load(f"{d}/label_mask.npy").astype(bool)
          keep &= np.load(f"{d}/attention_mask.npy") != 0
          keep &= np.load(f"{d}/instance_mask.npy").astype(bool)[:, None]
          if not np.array_equal(labels[j][:, :-1], ids[:, 1:]):
              fail(f"run fields: rank {r} batch {j}: labels are not input_ids shifted by one")
          if not np.array_equal(loss[j][:, :-1], keep[:, 1:].astype(np.float32)) or loss[j][:, -1].any():
              fail(f"run fields: rank {r} batch {j}: loss mask is not OLMo's label mask")
          checked["run"] += 1

# TP and CP peers get what their DP rank reads (TP 2 x CP 2 x DP W, W <= 2).
grid_case = [n for n in DATALOADER if load("dataloader", n)["world_size"] <= 2
             and load("dataloader", n)["train_config"]["model"]["max_sequence_length"] % 4 == 0]
if not grid_case:
    fail("no dataloader case with a world size <= 2 for the grid run")
c = load("dataloader", grid_case[0])
W = c["world_size"]
cfg = json.loads(json.dumps(c["train_config"]))
if cfg["data"].get("instance_filter") == "default":
    cfg["data"]["instance_filter"] = {}
cfg["device_train_microbatch_size"] = 1
B = cfg["device_train_batch_size"]
streams = [rank_streams([r for r in c["runs"] if r["rank"] == d and r["num_workers"] == 0][0])
           for d in range(W)]
iters = min(len(x) for x in streams) // B
out = os.path.join(WORK, "grid")
sh(["mpirun", "-n", str(4 * W), "--oversubscribe", GRIDFEED, "run", "--config", config_file(cfg),
    "--tensor-model-parallel-size", "2", "--context-parallel-size", "2", "--train-iters",
    str(iters), "--dump", out], what="OLMo run on a TP 2 x CP 2 grid")
for rank in range(4 * W):
    dp = rank // 4  # Megatron's order tp-cp-ep-dp-pp
    got = np.load(f"{out}/rank{rank}/sample_indices.npy").reshape(-1)
    if got.size != iters * B or not np.array_equal(got, streams[dp][:got.size]):
        fail(f"grid run: world rank {rank} (DP {dp}) did not get its DataLoader's stream")
checked["run"] += 1

# A corpus with three or more files for the runs below (from corpora.json, any set).
with open("corpora/corpora.json") as f:
    CORPORA = json.load(f)
name, corpus = max(CORPORA.items(), key=lambda kv: sum(x["tokens"] for x in kv[1]["files"]))
FILES = ["corpora/" + x["path"] for x in corpus["files"]]
DTYPE = corpus["spec"]["dtype"]

# Accounting by data.datasets label: what the ledger consumed, per label.
cfg = {"seed": 3, "global_train_batch_size": 4, "device_train_microbatch_size": 2,
       "model": {"max_sequence_length": 128},
       "data": {"memmap_dtype": DTYPE,
                "datasets": {"web": [FILES[0]], "books": [FILES[1], FILES[2]]}}}
ledger = os.path.join(WORK, "acc")
sh(["mpirun", "-n", "2", "--oversubscribe", GRIDFEED, "run", "--config", config_file(cfg),
    "--train-iters", "6", "--ledger", ledger], what="OLMo run with data.datasets")
acc = json.loads(sh([GRIDFEED, "audit", "accounting", "--ledger", ledger, "--json"],
                    what="accounting", stdout_only=True))
if [a["source"] for a in acc] != ["books", "web"] or sum(a["samples"] for a in acc) != 24:
    fail(f"accounting by label: {acc}")
# Labels are sorted (books before web), so books' instances come first (file sizes / chunk).
size = 4 if DTYPE == "uint32" else 2
books = sum(os.path.getsize(p) // size // 128 for p in (FILES[1], FILES[2]))
counted = {"books": 0, "web": 0}
for f in os.listdir(ledger):
    if not f.endswith(".tsv"):
        continue  # the folder's lock files
    for line in open(os.path.join(ledger, f)):
        if not line.startswith("#") and not line.startswith("iteration"):
            instance = int(line.split("\t")[5])  # dataset_sample: the OLMo instance
            counted["books" if instance < books else "web"] += 1
if {a["source"]: a["samples"] for a in acc} != counted:
    fail(f"accounting by label {acc} does not count the ledger's instances {counted}")
checked["run"] += 1

# ---------------------------------------------------------------- kill and resume
# 2 ranks, device batch 2: an epoch is N / 4 iterations; the chunk makes it about 12.5.
tokens = max(x["tokens"] for x in corpus["files"])
cfg = {"seed": 7, "global_train_batch_size": 4, "device_train_microbatch_size": 1,
       "model": {"max_sequence_length": max(8, tokens // 50)},
       "data": {"paths": [FILES[[x["tokens"] for x in corpus["files"]].index(tokens)]],
                "memmap_dtype": DTYPE, "num_workers": 2}}
path = config_file(cfg)
base = ["mpirun", "-n", "2", "--oversubscribe", GRIDFEED, "run", "--config", path,
        "--train-iters", "30"]
full, cut, ck = (os.path.join(WORK, x) for x in ("full", "cut", "ck.h5"))
sh(base + ["--ledger", full], what="uninterrupted OLMo run")
sh(base + ["--ledger", cut, "--save", ck, "--save-interval", "10", "--testing-kill-rank", "0",
           "--testing-kill-step", "14"], expect_ok=False, what="killed OLMo run")
o = sh(base + ["--ledger", cut, "--resume", ck], what="resumed OLMo run")
if "at iteration 10" not in o:
    fail("the OLMo run did not resume at iteration 10: " + o)
for f in sorted(x for x in os.listdir(full) if x.endswith(".tsv")):
    a = [l for l in open(os.path.join(full, f)) if not l.startswith("#")]
    b = [l for l in open(os.path.join(cut, f)) if not l.startswith("#")]
    if a != b:
        fail(f"OLMo ledger {f} differs after kill and resume")
sh([GRIDFEED, "audit", "verify", "--ledger", cut], what="audit verify of an OLMo ledger")
o = sh(["mpirun", "-n", "1", GRIDFEED, "run", "--config", path, "--train-iters", "31",
        "--resume", ck], expect_ok=False, what="OLMo resume at another DP size")
checked["resume"] += 1

# ---------------------------------------------------------------- configuration errors
bad = {"model": {"max_sequence_length": 8}, "data": {"paths": [FILES[0]], "num_wrokers": 2}}
o = sh([GRIDFEED, "tables", "--config", config_file(bad), "--out", WORK + "/x"], False, "typo")
if "data.num_wrokers" not in o:
    fail("an unknown data key is not named: " + o)
both = {"data": {"paths": ["a.npy"], "datasets": {"x": ["b.npy"]}}}
o = sh([GRIDFEED, "tables", "--config", config_file(both), "--out", WORK + "/x"], False, "both")
if "mutually exclusive" not in o:
    fail("paths + datasets not refused: " + o)
checked["config"] += 2
# A misspelt top-level key is not OLMo's: refused, naming it and the nearest key (OLMo itself
# refuses it; gridfeed used to train with the default 512 instead).
typo = {"global_train_batch_sise": 8, "model": {"max_sequence_length": 8},
        "data": {"paths": [FILES[0]], "memmap_dtype": DTYPE}}
for cmd in (["tables", "--out", WORK + "/x"], ["samples", "--positions", "0", "--out", WORK + "/x"]):
    o = sh([GRIDFEED, cmd[0], "--config", config_file(typo)] + cmd[1:], False, "top-level typo")
    if "global_train_batch_sise" not in o or "did you mean 'global_train_batch_size'" not in o:
        fail("a misspelt top-level key is not refused with the nearest key: " + o)
o = sh(["mpirun", "-n", "1", GRIDFEED, "run", "--config", config_file(typo), "--train-iters", "1"],
       False, "top-level typo, run")
if "global_train_batch_sise" not in o:
    fail("run does not refuse a misspelt top-level key: " + o)
# gridfeed's own data keys in an OLMo YAML are errors, not dropped.
for key, value in (("seq-length", 16), ("sources", [{"name": "a", "path": "x"}]),
                   ("schedule", [{"samples": 4}])):
    cfg = {key: value, "model": {"max_sequence_length": 8},
           "data": {"paths": [FILES[0]], "memmap_dtype": DTYPE}}
    o = sh([GRIDFEED, "tables", "--config", config_file(cfg), "--out", WORK + "/x"], False, key)
    if f"'{key}'" not in o:
        fail(f"gridfeed's key {key} in an OLMo config is not refused by name: " + o)
# device_train_batch_size is checked alike by tables and run: global / DP.
dev = {"global_train_batch_size": 4, "device_train_batch_size": 4,
       "model": {"max_sequence_length": 8}, "data": {"paths": [FILES[0]], "memmap_dtype": DTYPE}}
path = config_file(dev)
sh([GRIDFEED, "tables", "--config", path, "--data-parallel-size", "1", "--out", WORK + "/d1"],
   what="device batch = global / DP")
o1 = sh([GRIDFEED, "tables", "--config", path, "--data-parallel-size", "2", "--out", WORK + "/d2"],
        False, "tables: device batch != global / DP")
o2 = sh(["mpirun", "-n", "2", "--oversubscribe", GRIDFEED, "run", "--config", path,
         "--train-iters", "1"], False, "run: device batch != global / DP")
for o in (o1, o2):
    if "device_train_batch_size" not in o:
        fail("a device batch that is not global / DP is not refused by name: " + o)
checked["config"] += 9
# OLMo's order is sized for --train-iters: a checkpoint several epochs in (the smallest file,
# a few instances) resumed with --train-iters 1 has nothing left to run (it was refused as a
# forged cursor, the order planned for one iteration being shorter than the cursor).
small = min(FILES, key=lambda f: os.path.getsize(f))
path = config_file({"global_train_batch_size": 4, "device_train_batch_size": 4,
                    "model": {"max_sequence_length": 8},
                    "data": {"paths": [small], "memmap_dtype": DTYPE}})
ck = WORK + "/later.h5"
sh(["mpirun", "-n", "1", GRIDFEED, "run", "--config", path, "--train-iters", "60", "--save", ck],
   what="OLMo run to iteration 60 with a checkpoint")
o = sh(["mpirun", "-n", "1", GRIDFEED, "run", "--config", path, "--train-iters", "1", "--resume",
        ck], what="OLMo resume past --train-iters")
if "nothing to run" not in o:
    fail("an OLMo resume past --train-iters does not say there is nothing to run: " + o)
checked["config"] += 1

shutil.rmtree(WORK)
print("olmo commands: ok", json.dumps(checked))
