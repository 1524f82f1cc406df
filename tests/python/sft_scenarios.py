"""Scenarios of test_sft_mpi.py, one per run under mpirun: `sft_scenarios.py NAME WORK_DIR`.

Run from tests/golden/megatron-sft (the golden set's relative paths). Each rank writes its PID
to WORK_DIR/rank<N>.pid first (test_job_end.Job cleans up by it). A scenario that ends well
prints "SCENARIO OK" on world rank 0 and exits 0; bad_row must end the job."""
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import gridfeed

WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()
CASE = "cases/cp2_h_aligned_L128"


def case_kwargs(case_dir):
    """A golden case's inputs (case.json) as Feeder keywords (what sft_golden_flags.py gives
    the command line)."""
    i = json.load(open(os.path.join(case_dir, "case.json")))["inputs"]
    kw = {"sft": True, "data_path": i["data_path"], "split": i["split"],
          "train_samples": i["sizes"][0], "valid_samples": i["sizes"][1],
          "test_samples": i["sizes"][2], "seq_length": i["seq_length"], "seed": i["seed"],
          "tokenizer_model": i["tokenizer_dir"], "sft_tokenizer_prompt_format": i["prompt_format"],
          "context_parallel_size": i["context_parallel_size"]}
    if i.get("eod_mask_loss"):
        kw["eod_mask_loss"] = True
    if "mid_level_dataset_surplus" in i:
        kw["mid_level_dataset_surplus"] = float(i["mid_level_dataset_surplus"])
    return kw


def golden_cp2():
    """TP 2 x PP 2 x CP 2 (8 ranks): every rank's micro-batches 0 and 1 of case
    cp2_h_aligned_L128 equal what Megatron's get_batch leaves on that rank: probe pp1_cp2_mbs2
    (micro-batch 0) and pp2_first_cp2 (micro-batch 1); their cp_rank_<r>/index.npy applied to
    the case's flattened micro-batch gives the fields a stage holds (the last stage's labels and
    loss mask too), and the probe's own sliced arrays are compared where it has them."""
    kw = case_kwargs(CASE)
    f = gridfeed.Feeder(comm=WORLD, tensor_model_parallel_size=2,
                        pipeline_model_parallel_size=2, micro_batch_size=2, global_batch_size=2,
                        **kw)
    problems, checked = [], 0

    def same(got, want, what):
        nonlocal checked
        got, want = np.asarray(got), np.asarray(want)
        if got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f"rank {RANK} {what}: {got.dtype}{got.shape} != "
                            f"{want.dtype}{want.shape}")
        elif not np.array_equal(got, want):
            bad = np.flatnonzero((got != want).ravel())
            problems.append(f"rank {RANK} {what}: {bad.size} of {got.size} differ, first at "
                            f"{bad[0]}: {got.ravel()[bad[0]]} != {want.ravel()[bad[0]]}")
        checked += 1

    def check(cond, what):
        nonlocal checked
        if not cond:
            problems.append(f"rank {RANK} {what}")
        checked += 1

    check(f.sizes == {"dp": 1, "tp": 2, "pp": 2, "cp": 2}, f"sizes {f.sizes}")
    check(f.options["sft"] and f.options["sft_context_parallel_size"] == 2, "options")
    first = f.is_first_stage
    fields = ("tokens", "position_ids") if first else ("labels", "loss_mask")
    indices = np.load(f"{CASE}/batches/b0/dp_rank_0/sample_indices.npy")
    for mb_index, probe in ((0, "pp1_cp2_mbs2"), (1, "pp2_first_cp2")):
        mb = f.next()
        what = f"mb {mb_index} (cp {f.cp_rank}, pp {f.pp_rank})"
        g = f"get_batch/{probe}/cp_rank_{f.cp_rank}"
        flat = f"{CASE}/batches/b0/dp_rank_0/mb_{mb_index:02d}/flattened"
        index = np.load(f"{g}/index.npy")
        check(mb.packed is True, f"{what}: packed {mb.packed!r}")
        check(list(mb) == list(fields) + ["cu_seqlens", "max_seqlen"], f"{what}: keys {list(mb)}")
        check((mb.micro_batch_size, mb.seq_length, mb.local_seq_length) == (2, 128, 64),
              f"{what}: sizes {(mb.micro_batch_size, mb.seq_length, mb.local_seq_length)}")
        same(mb.cu_seqlens, np.load(f"{g}/cu_seqlens.npy")[0], f"{what} cu_seqlens")
        check(mb.cu_seqlens.base is mb and not mb.cu_seqlens.flags.owndata,
              f"{what}: cu_seqlens is not a view of the MicroBatch")
        max_seqlen = int(np.load(f"{g}/max_seqlen.npy")[0])
        check(type(mb.max_seqlen) is int and mb.max_seqlen == max_seqlen,
              f"{what}: max_seqlen {mb.max_seqlen!r} != {max_seqlen}")
        same(mb.sample_indices, indices[mb_index], f"{what} sample_indices")
        for name in fields:
            want = np.load(f"{flat}/{name}.npy")[:, index]  # [1, mbs * L / cp]
            if os.path.exists(f"{g}/{name}.npy"):
                same(want, np.load(f"{g}/{name}.npy"), f"{what} probe's own {name}")
            same(mb[name], want, f"{what} {name}")
            check(mb[name].base is mb, f"{what}: {name} is not a view of the MicroBatch")
        check(repr(mb).startswith("<gridfeed.MicroBatch packed [1 x 128]"), repr(mb))
    f.close()
    all_problems = [p for ps in WORLD.allgather(problems) for p in ps]
    counts = WORLD.allgather(checked)
    if RANK == 0:
        for p in all_problems:
            print("MISMATCH", p, flush=True)
        if not all_problems:
            print(f"golden_cp2: {sum(counts)} checks on {len(counts)} ranks", flush=True)
    if all_problems:
        sys.exit(1)
    ok()


def bad_row():
    """A row Megatron fails on (an assistant message without content, row 3 of the file) at
    TP 2 x DP 2 (4 ranks): the reader's TP group (world ranks 2 and 3, DP rank 1 reads position
    3) raises from next() naming the file and row; the exception is left uncaught there, which
    ends the job (the other DP rank never learns it)."""
    work = sys.argv[2]
    bad = os.path.join(work, "bad.jsonl")
    if RANK == 0:
        rows = open("corpora/sft_a.jsonl").read().splitlines(keepends=True)
        row = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}\n'
        open(bad, "w").write("".join(rows[:3] + [row] + rows[3:]))
    WORLD.Barrier()
    f = gridfeed.Feeder(comm=WORLD, sft=True, data_path=[bad], split="100,0,0",
                        train_samples=8, valid_samples=0, test_samples=0, seq_length=64,
                        tokenizer_model="tokenizers/chat", tensor_model_parallel_size=2,
                        micro_batch_size=1, train_iters=4)
    for _ in range(4):
        try:
            f.next()
        except gridfeed.Error as e:
            print(f"rank {RANK} (reader {f.is_reader}, dp {f.dp_rank}) raised "
                  f"{type(e).__name__}: {e}", flush=True)
            raise
    f.close()  # not reached on every rank: the job is ended by the uncaught exception
    ok()


def ok():
    WORLD.Barrier()
    if RANK == 0:
        print("SCENARIO OK", flush=True)


if __name__ == "__main__":
    with open(os.path.join(sys.argv[2], f"rank{RANK}.pid"), "w") as pid:
        pid.write(str(os.getpid()))
    globals()[sys.argv[1]]()
