"""Scenarios of test_job_end.py, one per run under mpirun: `job_end_scenarios.py NAME PID_DIR`.

Each rank writes its PID to PID_DIR/rank<N>.pid first (so the test can signal a rank, and
clean up what it started). A scenario that ends well prints "SCENARIO OK" on world rank 0 and
exits 0; the ones that must end the job abort it. Run from tests/golden/megatron (job.yaml's
paths). `signal` is imported only by the scenarios that use it: gridfeed's first import of it
must be the process's first (first_calls_from_two_threads)."""
import os
import sys
import threading
import time

from mpi4py import MPI

import gridfeed

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "job.yaml")
WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()


def feeder(**kw):
    return gridfeed.Feeder(comm=WORLD, config=JOB, **{"micro_batch_size": 2, **kw})


def ok():
    WORLD.Barrier()
    if RANK == 0:
        print("SCENARIO OK", flush=True)


def uncaught_at_pp2():
    """README's first snippet at PP 2: the last stage reads 'tokens', which it does not get."""
    f = feeder(pipeline_model_parallel_size=2, global_batch_size=4)
    mb = f.next()
    mb["tokens"]  # KeyError on the last stage
    f.close()


def uncaught_in_with():
    """Rank 1 raises inside a with block; the others go on to close() (a collective)."""
    with feeder(global_batch_size=4 * WORLD.Get_size() // 2) as f:
        f.next()
        if RANK == 1:
            raise ValueError("boom on rank 1")
        f.next()


def close_while_unwinding():
    """Rank 1 closes in a finally block while its exception unwinds; rank 0 waits in a
    barrier that rank 1 never reaches: rank 1's close() must not wait for rank 0."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        try:
            raise RuntimeError("boom on rank 1")
        finally:
            f.close()
    WORLD.Barrier()
    f.close()


def intercommunicator():
    color = RANK % 2
    local = WORLD.Split(color, RANK)
    inter = local.Create_intercomm(0, WORLD, 1 - color, tag=7)
    try:
        gridfeed.Feeder(comm=inter, config=JOB, micro_batch_size=2).close()
        mine = None
    except gridfeed.InvalidArgument as e:
        mine = str(e)
    got = WORLD.allgather(mine)
    assert all(g is not None and "intercommunicator" in g for g in got), got
    ok()


def two_threads_next():
    """Two threads call next() at once, 40 times each: every call gets its own micro-batch."""
    f = feeder(global_batch_size=2)
    positions, errors = [], []
    start = threading.Barrier(2)

    def work():
        start.wait()
        try:
            for _ in range(40):
                positions.extend(int(p) for p in f.next().sample_positions)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(positions) == list(range(160)), sorted(positions)[:10]
    assert f.consumed_samples == 160, f.consumed_samples
    f.close()
    ok()


def close_during_next():
    """TP 2: TP rank 1's next() waits for TP rank 0 (a second late); meanwhile another thread
    of TP rank 1 calls close(), which must refuse at once, not deadlock."""
    f = feeder(tensor_model_parallel_size=2, global_batch_size=2)
    if f.tp_rank == 0:
        time.sleep(1.5)
        f.next()
    else:
        got = []
        t = threading.Thread(target=lambda: got.append(f.next()))
        t.start()
        time.sleep(0.3)
        began = time.monotonic()
        try:
            f.close()
            raise AssertionError("close() during next() did not raise")
        except gridfeed.FailedPrecondition as e:
            assert "next()" in str(e), e
        assert time.monotonic() - began < 0.5
        t.join()
        assert len(got) == 1 and f.consumed_samples == 2
    f.close()
    try:
        f.next()
        raise AssertionError("next() after close() did not raise")
    except gridfeed.FailedPrecondition:
        pass
    ok()


def numpy_views_from_two_threads():
    """The first NumPy views of a process, made from two threads at once (numpy not imported
    before gridfeed's first views)."""
    f = feeder(global_batch_size=2)
    mbs = [f.next(), f.next()]
    start = threading.Barrier(2)
    shapes = []

    def view(mb):
        start.wait()
        for _ in range(200):
            shapes.append(mb["tokens"].shape)

    threads = [threading.Thread(target=view, args=(mb,)) for mb in mbs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shapes == [(2, 64)] * 400
    f.close()
    ok()


def first_calls_from_two_threads():
    """The process's first next(), NumPy views (fields of every dtype the job has: int64,
    float32, bool; positions, source ids, cu_seqlens) and offline results (samples, tables),
    from two threads at once: nothing gridfeed initialises on a first call may wait for the GIL
    while holding a C++ guard (it deadlocked in next()'s first look at Python's SIGINT
    handler)."""
    f = feeder(global_batch_size=2)
    start = threading.Barrier(2)
    seen, errors = [], []

    def work():
        start.wait()
        try:
            for _ in range(20):
                mb = f.next()
                seen.append(sorted((k, str(mb[k].dtype)) for k in mb))
                seen.append([mb.sample_positions.dtype, mb.source_ids.dtype, mb.cu_seqlens.dtype])
            got = gridfeed.samples([0, 1], config=JOB)
            assert got["tokens"].shape == (2, 64), got["tokens"].shape
            assert gridfeed.tables(config=JOB)["train"]["length"] == 400
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(seen) == 80 and f.consumed_samples == 80, (len(seen), f.consumed_samples)
    kinds = dict(seen[0])
    assert {kinds["tokens"], kinds["loss_mask"], kinds["attention_mask"]} == {
        "int64", "float32", "bool"}, kinds
    f.close()
    ok()


def finalize_with_open_feeder():
    """MPI.Finalize() with an open Feeder whose prefetch thread is busy: no crash; the Feeder
    is given up and raises afterwards."""
    f = feeder(global_batch_size=2 * WORLD.Get_size(), prefetch_depth=65536)
    f.next()
    WORLD.Barrier()
    MPI.Finalize()
    try:
        f.next()
        raise AssertionError("next() after MPI_Finalize did not raise")
    except gridfeed.FailedPrecondition as e:
        assert "Finalize" in str(e), e
    del f
    print("SCENARIO OK", flush=True)


def sigint_with_stuck_peer():
    """TP 2: TP rank 0 never calls next() (a stuck peer); TP rank 1 waits in next() and gets
    SIGINT (sent by the test): the job must end."""
    f = feeder(tensor_model_parallel_size=2, global_batch_size=2)
    if f.tp_rank == 0:
        time.sleep(600)
    else:
        open(os.path.join(sys.argv[2], "waiting"), "w").close()
        f.next()
    f.close()


def sigint_keeps_the_micro_batch():
    """TP 2: SIGINT reaches TP rank 1 while its next() waits for TP rank 0 (a second late):
    the micro-batch is not lost; KeyboardInterrupt comes from the next call, before it takes
    anything, so consumed_samples counts exactly what was handed over."""
    import signal

    f = feeder(tensor_model_parallel_size=2, global_batch_size=2)
    if f.tp_rank == 0:
        time.sleep(1.0)
        f.next()
        handed, interrupted = 1, False
    else:
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        handed, interrupted = 0, False
        for _ in range(2):
            try:
                f.next()
                handed += 1
            except KeyboardInterrupt:
                interrupted = True
                break
        assert interrupted, "no KeyboardInterrupt"
    assert f.consumed_samples == 2 * handed, (f.consumed_samples, handed)
    WORLD.Barrier()
    f.close()
    ok()


def sigint_with_own_handler():
    """TP 2: a trainer's own SIGINT handler (a graceful stop) is not overruled: SIGINT reaches
    TP rank 1 while its next() waits 5 s for TP rank 0 (longer than the grace period); the job
    is not aborted, the handler runs and the loop stops after that micro-batch."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    f = feeder(tensor_model_parallel_size=2, global_batch_size=2)
    if f.tp_rank == 0:
        time.sleep(5.0)
        f.next()
    else:
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        f.next()
        assert stop.is_set(), "the trainer's SIGINT handler did not run"
    WORLD.Barrier()
    f.close()
    ok()


def _others_keep_feeding(f):
    """What the ranks that do not end early do: go on calling next(), then close()."""
    for _ in range(3):
        f.next()
    f.close()
    ok()


def out_of_data_in_with_caught_everywhere():
    """Every rank runs out of data inside a with block and catches StopIteration outside it
    (the end of the split comes at the same step everywhere: a collective close)."""
    try:
        with feeder(global_batch_size=2 * WORLD.Get_size(), split_name="test") as f:
            while True:
                f.next()
    except StopIteration:
        pass
    ok()


def sys_exit_on_one_rank():
    """Rank 1 calls sys.exit(3) with its Feeder open; rank 0 goes on (next(), close())."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        sys.exit(3)
    _others_keep_feeding(f)


def raise_system_exit_in_with():
    """Rank 1 raises SystemExit(4) inside a with block (the Feeder is given up)."""
    with feeder(global_batch_size=2 * WORLD.Get_size()) as f:
        f.next()
        if RANK == 1:
            raise SystemExit(4)
        for _ in range(3):
            f.next()
    ok()


def return_early_on_one_rank():
    """Rank 1's script simply ends (exit code 0) with its Feeder open."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        return
    _others_keep_feeding(f)


def keyboard_interrupt_on_one_rank():
    """KeyboardInterrupt left uncaught on rank 1 (goes through sys.excepthook)."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        raise KeyboardInterrupt
    _others_keep_feeding(f)


def sys_exit_0_everywhere_after_close():
    """Every rank closes its Feeder, then calls sys.exit(0): a clean end, rc 0."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    f.close()
    ok()
    sys.exit(0)


class _FramedStderr:
    """Stands in for sys.stderr: each write() call reaches fd 2 framed as <<...>>, so the test
    sees how the text was cut into writes."""

    def write(self, text):
        os.write(2, f"<<{text}>>".encode())
        return len(text)

    def flush(self):
        pass


def traceback_in_one_write():
    """Rank 1 raises. What it prints (gridfeed's line, the traceback) must be one write: when
    ranks fail together, their small writes interleave in mpirun's output, cutting lines."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        sys.stderr = _FramedStderr()
        raise ValueError("boom on rank 1")
    _others_keep_feeding(f)


def traceback_with_stderr_none():
    """Rank 1 raises with sys.stderr set to None (as under pythonw or a closed console): the
    line and the traceback still reach file descriptor 2, and the job still ends."""
    f = feeder(global_batch_size=2 * WORLD.Get_size())
    f.next()
    if RANK == 1:
        sys.stderr = None
        raise ValueError("boom on rank 1")
    _others_keep_feeding(f)


if __name__ == "__main__":
    with open(os.path.join(sys.argv[2], f"rank{RANK}.pid"), "w") as pid:
        pid.write(str(os.getpid()))
    globals()[sys.argv[1]]()
