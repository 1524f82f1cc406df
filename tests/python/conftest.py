"""Shared fixtures of the Python tests.

Run from tests/golden/megatron (the corpora's relative paths), with PYTHONPATH naming the
built module, GRIDFEED_BIN the `gridfeed` program and, for the MPI tests, GRIDFEED_CLI_DUMP
the folder of the CLI runs to compare with (tests/python/run_mpi_tests.sh prepares them).

Under mpirun every rank runs every test; a test's outcome is agreed over MPI.COMM_WORLD after
it ran, so one rank's failure fails the test on every rank and all ranks go on together.
"""
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "job.yaml")
UNDER_MPI = any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"))


def env_path(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set (run through ctest or tests/python/run_*.sh)")
    return value


@pytest.fixture(scope="session")
def gridfeed_bin():
    return env_path("GRIDFEED_BIN")


@pytest.fixture(scope="session")
def cli_dump():
    return env_path("GRIDFEED_CLI_DUMP")


@pytest.fixture(scope="session")
def job():
    return JOB


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not UNDER_MPI or report.when != "call":
        return
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    failed = world.allgather(report.failed)
    if any(failed) and not report.failed:
        report.outcome = "failed"
        report.longrepr = f"failed on rank(s) {[r for r, f in enumerate(failed) if f]}"
