"""How a Python job ends when something goes wrong on some ranks, and the Feeder's thread
safety: each test runs a scenario of job_end_scenarios.py under its own mpirun with a time
limit, so a hang is a failure (never a stuck CI). Also README's PP 2 example
(docs/examples/train_pp.py), run as written. Not run under mpirun itself; run from
tests/golden/megatron with PYTHONPATH naming the module (ctest does both)."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCENARIOS = os.path.join(HERE, "job_end_scenarios.py")
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_mpi_yield_when_idle": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
       "PYTHONDONTWRITEBYTECODE": "1"}


class Job:
    """One mpirun of `argv` (its own session); kill() ends what it started: mpirun's process
    group, then each rank by the PID it wrote."""

    def __init__(self, n, argv, pid_dir, cwd=None):
        self.pid_dir = pid_dir
        cmd = ["mpirun", "-n", str(n), "--oversubscribe", "-x", "PYTHONPATH", "-x",
               "PYTHONDONTWRITEBYTECODE", "-x", "OPENBLAS_NUM_THREADS", "-x", "OMP_NUM_THREADS",
               sys.executable] + argv
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=ENV, cwd=cwd, start_new_session=True)
        self.began = time.monotonic()

    def rank_pid(self, rank, timeout=60):
        path = os.path.join(self.pid_dir, f"rank{rank}.pid")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path) and open(path).read().strip():
                return int(open(path).read())
            time.sleep(0.1)
        raise AssertionError(f"rank {rank} did not start")

    def kill(self):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            for name in os.listdir(self.pid_dir):
                if name.endswith(".pid"):
                    try:
                        os.kill(int(open(os.path.join(self.pid_dir, name)).read()), sig)
                    except (ProcessLookupError, ValueError):
                        pass
            time.sleep(1)

    def wait(self, timeout):
        """(rc, output, seconds); rc None when it was still running after `timeout` s."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
            return self.proc.returncode, out, time.monotonic() - self.began
        except subprocess.TimeoutExpired:
            self.kill()
            out, _ = self.proc.communicate()
            return None, out, time.monotonic() - self.began


@pytest.fixture
def pid_dir():
    with tempfile.TemporaryDirectory(prefix="gridfeed_job_end_") as d:
        yield d


def scenario(n, name, pid_dir, timeout=60):
    job = Job(n, [SCENARIOS, name, pid_dir], pid_dir)
    return job.wait(timeout)


def assert_ok(result):
    rc, out, _ = result
    assert rc == 0 and "SCENARIO OK" in out, f"rc {rc}:\n{out}"


def assert_aborted(result, *needles, within=None):
    rc, out, seconds = result
    assert rc is not None, f"the job hung (killed after {seconds:.0f} s):\n{out}"
    assert rc != 0, f"rc 0:\n{out}"
    for needle in needles:
        assert needle in out, f"no {needle!r} in:\n{out}"
    if within is not None:
        assert seconds < within, f"took {seconds:.0f} s:\n{out}"


def test_an_uncaught_exception_at_pp2_ends_the_job_with_its_traceback(pid_dir):
    # Ranks 0 and 1 (first stage) wait in close(); ranks 2 and 3 raise KeyError.
    assert_aborted(scenario(4, "uncaught_at_pp2", pid_dir), "Traceback", "KeyError: 'tokens'",
                   "gridfeed: error (rank 2 of 4): uncaught KeyError")


def test_an_exception_in_a_with_block_on_one_rank_ends_the_job(pid_dir):
    assert_aborted(scenario(4, "uncaught_in_with", pid_dir), "ValueError: boom on rank 1",
                   "gridfeed: error (rank 1 of 4): uncaught ValueError")


def test_close_while_an_exception_unwinds_does_not_wait_for_peers(pid_dir):
    assert_aborted(scenario(2, "close_while_unwinding", pid_dir), "RuntimeError: boom on rank 1",
                   "gridfeed: error (rank 1 of 2): uncaught RuntimeError")


def test_each_ranks_error_and_traceback_is_one_write(pid_dir):
    rc, out, seconds = result = scenario(2, "traceback_in_one_write", pid_dir)
    assert_aborted(result, within=40)
    writes = [piece.split(">>")[0] for piece in out.split("<<")[1:]]
    one = re.compile(r"gridfeed: error \(rank 1 of 2\): uncaught ValueError.*\n"
                     r"Traceback \(most recent call last\):\n.*ValueError: boom on rank 1\n",
                     re.DOTALL)
    assert any(one.fullmatch(w) for w in writes), f"rank 1's error is not one write:\n{out}"


def test_with_sys_stderr_none_the_error_still_reaches_fd_2_and_ends_the_job(pid_dir):
    assert_aborted(scenario(2, "traceback_with_stderr_none", pid_dir),
                   "gridfeed: error (rank 1 of 2): uncaught ValueError",
                   "ValueError: boom on rank 1", within=40)


USER_HOOK = """
import os, sys
def hook(kind, value, tb):  # needs the real stream: its bytes buffer and encoding
    sys.stderr.buffer.write(("USER HOOK: %s\\n" % value).encode(sys.stderr.encoding))
    sys.stderr.flush()
sys.excepthook = hook
from mpi4py import MPI
import gridfeed
rank = MPI.COMM_WORLD.Get_rank()
with open(os.path.join(sys.argv[1], "rank%d.pid" % rank), "w") as pid:
    pid.write(str(os.getpid()))
if rank == 1:
    raise ValueError("boom on rank 1")
MPI.COMM_WORLD.Barrier()
"""


def test_a_users_own_excepthook_prints_on_the_real_stream_before_the_abort(pid_dir):
    script = os.path.join(pid_dir, "user_hook.py")
    with open(script, "w") as f:
        f.write(USER_HOOK)
    assert_aborted(Job(2, [script, pid_dir], pid_dir).wait(60),
                   "gridfeed: error (rank 1 of 2): uncaught ValueError",
                   "USER HOOK: boom on rank 1", within=40)


def test_an_intercommunicator_is_refused_on_every_rank(pid_dir):
    assert_ok(scenario(4, "intercommunicator", pid_dir, timeout=60))


def test_two_threads_calling_next_each_get_their_own_micro_batches(pid_dir):
    assert_ok(scenario(1, "two_threads_next", pid_dir, timeout=60))


def test_close_during_next_on_another_thread_refuses(pid_dir):
    assert_ok(scenario(2, "close_during_next", pid_dir, timeout=60))


@pytest.mark.parametrize("attempt", range(3))
def test_first_numpy_views_from_two_threads(pid_dir, attempt):
    assert_ok(scenario(1, "numpy_views_from_two_threads", pid_dir, timeout=60))


@pytest.mark.parametrize("attempt", range(3))
def test_first_calls_from_two_threads(pid_dir, attempt):
    assert_ok(scenario(1, "first_calls_from_two_threads", pid_dir, timeout=60))


@pytest.mark.parametrize("attempt", range(3))
def test_mpi_finalize_with_an_open_feeder(pid_dir, attempt):
    assert_ok(scenario(2, "finalize_with_open_feeder", pid_dir, timeout=60))


def test_sigint_while_next_waits_for_a_stuck_peer_ends_the_job(pid_dir):
    job = Job(2, [SCENARIOS, "sigint_with_stuck_peer", pid_dir], pid_dir)
    rank1 = job.rank_pid(1)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(pid_dir, "waiting")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # inside next()
    sent = time.monotonic()
    os.kill(rank1, signal.SIGINT)
    rc, out, _ = job.wait(timeout=30)
    assert rc is not None, f"the job hung after SIGINT:\n{out}"
    assert rc != 0 and "interrupted (SIGINT) in gridfeed.Feeder.next()" in out, f"rc {rc}:\n{out}"
    assert time.monotonic() - sent < 20, out


def test_sigint_with_the_trainers_own_handler_is_not_an_abort(pid_dir):
    assert_ok(scenario(2, "sigint_with_own_handler", pid_dir, timeout=60))


def test_sigint_during_next_keeps_the_micro_batch(pid_dir):
    assert_ok(scenario(2, "sigint_keeps_the_micro_batch", pid_dir, timeout=60))


# A rank that ends on its own (SystemExit, KeyboardInterrupt, or its script's end) while its
# Feeder is open or given up: the job ends promptly, naming the rank and the exit code.
def test_sys_exit_on_one_rank_with_an_open_feeder_ends_the_job(pid_dir):
    assert_aborted(scenario(2, "sys_exit_on_one_rank", pid_dir, timeout=60),
                   "gridfeed: error (rank 1 of 2)", "exit code 3", within=40)


def test_raise_system_exit_in_a_with_block_on_one_rank_ends_the_job(pid_dir):
    assert_aborted(scenario(2, "raise_system_exit_in_with", pid_dir, timeout=60),
                   "gridfeed: error (rank 1 of 2)", within=40)


def test_a_script_that_ends_early_on_one_rank_ends_the_job(pid_dir):
    assert_aborted(scenario(2, "return_early_on_one_rank", pid_dir, timeout=60),
                   "gridfeed: error (rank 1 of 2)", "Feeder", within=40)


def test_keyboard_interrupt_on_one_rank_ends_the_job(pid_dir):
    assert_aborted(scenario(2, "keyboard_interrupt_on_one_rank", pid_dir, timeout=60),
                   "gridfeed: error (rank 1 of 2): uncaught KeyboardInterrupt", within=40)


def test_out_of_data_in_a_with_block_caught_everywhere_is_a_clean_end(pid_dir):
    assert_ok(scenario(2, "out_of_data_in_with_caught_everywhere", pid_dir, timeout=60))


def test_sys_exit_0_on_every_rank_after_close_is_a_clean_end(pid_dir):
    assert_ok(scenario(2, "sys_exit_0_everywhere_after_close", pid_dir, timeout=60))


def test_the_pp2_example_runs_as_written_and_resumes(tmp_path):
    """docs/examples/train_pp.py at TP 2 x PP 2 x DP 2 (8 ranks): a first run (no checkpoint
    yet) to iteration 2, then a second that resumes there and runs to 4."""
    example = os.path.join(ROOT, "docs", "examples", "train_pp.py")
    job_yaml = os.path.join(HERE, "job.yaml")
    megatron = os.path.join(ROOT, "tests", "golden", "megatron")
    ckpt = tmp_path / "ckpt" / "sub"  # save_checkpoint creates its folder
    outs = []
    for iters in (2, 4):
        pids = tmp_path / f"pids{iters}"
        pids.mkdir()
        job = Job(8, [example, "--config", job_yaml, "--train-iters", str(iters), "--save",
                      str(ckpt)], str(pids), cwd=megatron)
        rc, out, _ = job.wait(timeout=240)
        assert rc == 0, f"rc {rc}:\n{out}"
        outs.append(out)
    assert "starting at iteration 0" in outs[0] and "starting at iteration 2" in outs[1], outs
    assert "iteration 4 done" in outs[1], outs[1]
    assert (ckpt / "cursor.h5").exists()
