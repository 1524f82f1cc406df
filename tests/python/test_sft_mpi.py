"""gridfeed.Feeder with sft=True (Megatron's SFT pipeline, packed THD micro-batches) under
mpirun: each test runs a scenario of sft_scenarios.py under its own mpirun with a time limit
(test_job_end.Job), so a hang is a failure. Not run under mpirun itself; run from anywhere with
PYTHONPATH naming the module (ctest does).

- golden_cp2: TP 2 x PP 2 x CP 2, case cp2_h_aligned_L128 of tests/golden/megatron-sft: every
  rank's tokens/position_ids (first stage) or labels/loss_mask (last stage), cu_seqlens,
  max_seqlen and sample indices equal Megatron's get_batch probes (pp1_cp2_mbs2, pp2_first_cp2),
  as tests/cli/sft_run_mpi_test.sh checks `gridfeed run --dump`.
- bad_row: an assistant message without "content" makes next() raise on the reading rank's TP
  group, naming the file and row; left uncaught it ends the job, no rank waiting."""
import os
import tempfile

import pytest

from test_job_end import Job, assert_aborted, assert_ok

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(os.path.dirname(HERE), "golden", "megatron-sft")
SCENARIOS = os.path.join(HERE, "sft_scenarios.py")


@pytest.fixture
def work_dir():
    with tempfile.TemporaryDirectory(prefix="gridfeed_sft_") as d:
        yield d


def scenario(n, name, work_dir, timeout):
    return Job(n, [SCENARIOS, name, work_dir], work_dir, cwd=GOLDEN).wait(timeout)


def test_tp2_pp2_cp2_micro_batches_equal_megatrons_get_batch(work_dir):
    result = scenario(8, "golden_cp2", work_dir, timeout=240)
    assert_ok(result)
    assert "golden_cp2: 232 checks on 8 ranks" in result[1], result[1]


def test_a_bad_row_raises_on_the_reading_rank_and_ends_the_job(work_dir):
    bad = os.path.join(work_dir, "bad.jsonl")
    # World rank 2 reads DP rank 1's samples (position 3 is the bad row); its TP peer (3) gets
    # the reader's error through the TP broadcast; DP rank 0 (ranks 0, 1) is ended by the abort.
    rc, out, seconds = result = scenario(4, "bad_row", work_dir, timeout=120)
    named = f'reader world rank 2 (dp 1/2 tp 0/2 pp 0/1 cp 0/1): {bad} row 3, message 1: ' \
            '"content" is absent or not a string'
    assert_aborted(result, "gridfeed: error (rank 2 of 4): uncaught InvalidArgument",
                   f"rank 2 (reader True, dp 1) raised InvalidArgument: {named}",
                   f"gridfeed.InvalidArgument: {named}", within=90)
    assert "SCENARIO OK" not in out
    for rank in (0, 1):
        assert f"rank {rank} (" not in out, out
