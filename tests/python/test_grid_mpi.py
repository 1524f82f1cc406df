"""gridfeed.Feeder on a TP 2 x PP 2 x CP 1 x DP 2 grid (8 ranks under mpirun): what each stage
gets, equality with `gridfeed run --dump` of the same job, the same exception with the same
message on every rank, end of split at the same step everywhere. Run by run_mpi_tests.sh."""
import json
import os
import tempfile
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import gridfeed

WORLD = MPI.COMM_WORLD
GRID = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
        "micro_batch_size": 2, "global_batch_size": 8}


def open_feeder(job, **kw):
    return gridfeed.Feeder(comm=WORLD, config=job, **{**GRID, **kw})


def error_everywhere(make):
    """Calls make() on every rank; returns each rank's (class name, message)."""
    try:
        make().close()
        mine = None
    except gridfeed.Error as e:
        mine = (type(e).__name__, str(e))
    return WORLD.allgather(mine)


def test_world_is_eight_ranks():
    assert WORLD.Get_size() == 8


def test_stages_get_their_fields_and_match_the_cli_dump(job, cli_dump):
    with open_feeder(job) as f:
        d = os.path.join(cli_dump, "dump8", f"rank{f.world_rank}")
        meta = json.load(open(os.path.join(d, "meta.json")))
        assert [f.dp_rank, f.tp_rank, f.pp_rank, f.cp_rank] == [
            meta["dp_rank"], meta["tp_rank"], meta["pp_rank"], meta["cp_rank"]]
        assert f.sizes == {"dp": 2, "tp": 2, "pp": 2, "cp": 1}
        assert f.tp_comm.Get_size() == 2 and f.pp_comm.Get_size() == 2
        assert f.dp_comm.Get_size() == 2 and f.cp_comm.Get_size() == 1
        assert f.num_microbatches_per_global_batch == 2
        first = ["tokens", "position_ids", "attention_mask"]
        want_keys = first if f.pp_rank == 0 else ["labels", "loss_mask"]
        got = {k: [] for k in want_keys + ["sample_indices"]}
        for _ in range(3 * f.num_microbatches_per_global_batch):  # --train-iters 3
            mb = f.next()
            assert list(mb) == want_keys
            for k in want_keys:
                got[k].append(mb[k])
            got["sample_indices"].append(mb.sample_indices)
        peers = f.tp_comm.allgather(b"".join(np.stack(v).tobytes() for v in got.values()))
        fingerprints = WORLD.allgather(f.fingerprint)
    assert sorted(meta["fields"]) == sorted(want_keys)
    for k in want_keys + ["sample_indices"]:
        want = np.load(os.path.join(d, f"{k}.npy"))
        ours = np.stack(got[k])
        assert ours.dtype == (np.bool_ if k == "attention_mask" else want.dtype), k
        assert ours.shape == want.shape and np.array_equal(ours, want), k
    assert peers[0] == peers[1]
    ledger = open(os.path.join(cli_dump, "ledger8", "dp0.tsv")).readlines()[1].split()[2]
    assert set(fingerprints) == {ledger}


def test_missing_corpus_is_the_same_error_on_every_rank(job):
    errors = error_everywhere(lambda: open_feeder(job, data_path=["corpora/absent"]))
    assert errors[0] is not None and errors[0][0] == "NotFound", errors[0]
    assert "corpora/absent" in errors[0][1]
    assert all(e == errors[0] for e in errors), errors


def test_an_option_that_differs_on_one_rank_is_the_same_error_everywhere(job):
    seed = 99 if WORLD.Get_rank() == 3 else 1234
    errors = error_everywhere(lambda: open_feeder(job, seed=seed))
    assert errors[0] is not None and errors[0][0] == "FailedPrecondition", errors[0]
    assert errors[0][1].startswith("rank 3: options differ from rank 0's: --seed"), errors[0]
    assert all(e == errors[0] for e in errors), errors


def test_an_unknown_keyword_on_one_rank_is_the_same_error_everywhere(job):
    extra = {"sead": 5} if WORLD.Get_rank() == 5 else {}
    errors = error_everywhere(lambda: open_feeder(job, **extra))
    assert errors[0] == ("InvalidArgument", "rank 5: gridfeed.Feeder: unknown keyword 'sead' "
                         "(did you mean 'seed'?) (gridfeed.option_table() lists the options)"), \
        errors[0]
    assert all(e == errors[0] for e in errors), errors


def test_a_checkpoint_of_another_order_is_the_same_error_everywhere(job):
    folder = WORLD.bcast(tempfile.mkdtemp(prefix="gridfeed_py_") if WORLD.Get_rank() == 0 else None)
    path = os.path.join(folder, "cursor.h5")
    with open_feeder(job) as f:
        f.next()
        f.save_checkpoint(path, iteration=1)
    errors = error_everywhere(lambda: open_feeder(job, seed=99, resume=path))
    assert errors[0] is not None and errors[0][0] == "FailedPrecondition", errors[0]
    assert "seed: 1234 -> 99" in errors[0][1]
    assert all(e == errors[0] for e in errors), errors


def test_the_split_ends_at_the_same_step_on_every_rank(job):
    with open_feeder(job) as f:
        steps = 0
        while True:
            try:
                f.next()
            except StopIteration:
                break
            steps += 1
        counts = WORLD.allgather((steps, f.consumed_samples))
    assert set(counts) == {(400 // 4, 400)}, counts


def test_next_releases_the_gil_while_it_waits(job):
    """TP rank 1's next() waits in the TP broadcast until TP rank 0 (half a second late) sends;
    meanwhile a Python thread of its process keeps counting, so the GIL was released."""
    with open_feeder(job) as f:
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1

        spinner = threading.Thread(target=spin)
        spinner.start()
        if f.tp_rank == 0:
            time.sleep(0.5)
        before, start = count[0], time.perf_counter()
        f.next()
        waited, during = time.perf_counter() - start, count[0] - before
        stop.set()
        spinner.join()
        results = WORLD.allgather((f.tp_rank, waited, during))
    for tp, waited, during in results:
        if tp == 1:
            assert waited > 0.2 and during > 1000, (waited, during)
