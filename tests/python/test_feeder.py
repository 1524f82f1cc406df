"""gridfeed.Feeder at one rank (1 x 1 x 1 x 1) under mpirun: fields, dtypes and shapes,
zero-copy views, equality with `gridfeed run --dump` of the same job, end of split, ledger,
checkpoint and resume, errors. Run by run_mpi_tests.sh (which makes the CLI's dump)."""
import gc
import json
import os
import subprocess

import numpy as np
import pytest
import torch
from mpi4py import MPI

import gridfeed

GEOMETRY = {"micro_batch_size": 2, "global_batch_size": 4}


def open_feeder(job, **kw):
    return gridfeed.Feeder(comm=MPI.COMM_WORLD, config=job, **{**GEOMETRY, **kw})


def test_fields_dtypes_shapes_and_grid(job, cli_dump):
    with open_feeder(job) as f:
        assert (f.dp_rank, f.tp_rank, f.pp_rank, f.cp_rank) == (0, 0, 0, 0)
        assert f.sizes == {"dp": 1, "tp": 1, "pp": 1, "cp": 1}
        assert f.is_first_stage and f.is_last_stage and f.is_reader
        for name in ("world_comm", "dp_comm", "tp_comm", "pp_comm", "cp_comm"):
            comm = getattr(f, name)
            assert isinstance(comm, MPI.Intracomm) and comm.Get_size() == 1, name
        assert f.num_microbatches_per_global_batch == 2
        assert f.resumed_iteration == 0 and f.consumed_samples == 0
        assert f.options["seq_length"] == 64 and f.options["data_parallel_size"] == 1
        fingerprint = open(os.path.join(cli_dump, "ledger1", "dp0.tsv")).readlines()[1].split()[2]
        assert f.fingerprint == fingerprint  # what the CLI's run fingerprinted
        mb = f.next()
        assert f.consumed_samples == 2
        assert list(mb) == ["tokens", "position_ids", "attention_mask", "labels", "loss_mask"]
        want = {"tokens": (np.int64, (2, 64)), "labels": (np.int64, (2, 64)),
                "loss_mask": (np.float32, (2, 64)), "attention_mask": (np.bool_, (2, 1, 64, 64)),
                "position_ids": (np.int64, (2, 64))}
        for key, (dtype, shape) in want.items():
            assert mb[key].dtype == dtype and mb[key].shape == shape, key
        assert mb.sample_indices.dtype == np.int64 and list(mb.sample_indices) == [0, 1]
        assert list(mb.sample_positions) == [0, 1]  # Megatron's order: index = position
        assert mb.sample_positions.base is mb
        assert mb.source_ids.shape == (2,) and set(mb.source_ids) <= {0, 1}
        assert "tokens" in mb and "nothing" not in mb and mb.get("nothing") is None
        with pytest.raises(KeyError):
            mb["nothing"]
        assert set(dict(mb)) == set(want)


def test_equal_to_cli_run_dump(job, cli_dump):
    d = os.path.join(cli_dump, "dump1", "rank0")
    meta = json.load(open(os.path.join(d, "meta.json")))
    got = {k: [] for k in meta["fields"] + ["sample_indices", "source_ids"]}
    with open_feeder(job) as f:
        for _ in range(3 * f.num_microbatches_per_global_batch):  # --train-iters 3
            mb = f.next()
            for k in meta["fields"]:
                got[k].append(mb[k])
            got["sample_indices"].append(mb.sample_indices)
            got["source_ids"].append(mb.source_ids)
    for k in meta["fields"] + ["sample_indices"]:
        want = np.load(os.path.join(d, f"{k}.npy"))
        ours = np.stack(got[k])
        assert ours.shape == want.shape and np.array_equal(ours, want), k
    ledger = [l.split("\t") for l in open(os.path.join(cli_dump, "ledger1", "dp0.tsv"))
              if l[0].isdigit()]
    assert [int(l[3]) for l in ledger] == list(np.concatenate(got["sample_indices"]))
    assert [int(l[4]) for l in ledger] == list(np.concatenate(got["source_ids"]))


def test_an_olmo_configuration_equals_cli_run_dump(cli_dump, monkeypatch):
    golden_olmo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "olmo")
    monkeypatch.chdir(golden_olmo)  # the configuration's paths are relative to it
    d = os.path.join(cli_dump, "olmo_dump1", "rank0")
    meta = json.load(open(os.path.join(d, "meta.json")))
    got = {k: [] for k in meta["fields"] + ["sample_indices"]}
    with gridfeed.Feeder(config=os.path.join(cli_dump, "olmo.yaml")) as f:
        for _ in range(3 * f.num_microbatches_per_global_batch):  # --train-iters 3
            mb = f.next()
            assert sorted(mb) == sorted(meta["fields"])
            for k in meta["fields"]:
                got[k].append(mb[k])
            got["sample_indices"].append(mb.sample_indices)
    for k in got:
        want = np.load(os.path.join(d, f"{k}.npy"))
        ours = np.stack(got[k])
        assert ours.shape == want.shape and np.array_equal(ours, want), k
    # The offline functions read OLMo configurations too (compared with the CLI in
    # test_offline.py); here the order they describe is the one the feeder walked.
    t = gridfeed.tables(config=os.path.join(cli_dump, "olmo.yaml"))
    assert t["global_indices"].dtype == np.uint32
    assert set(np.concatenate(got["sample_indices"]).ravel()) <= set(t["global_indices"])


def test_a_megatron_micro_batch_is_not_packed(job):
    with open_feeder(job) as f:
        mb = f.next()
        assert mb.packed is False and mb.max_seqlen == 0
        assert mb.cu_seqlens.dtype == np.int32 and mb.cu_seqlens.shape == (0,)
        assert repr(mb) == ("<gridfeed.MicroBatch [2 x 64] tokens, position_ids, "
                            "attention_mask, labels, loss_mask>")


def test_sft_micro_batches_are_megatrons_flattened_ones():
    """sft=True at one rank (CP 1): every micro-batch of golden case boundary_L32 as Megatron's
    get_batch flattens it ([1, mbs * L] rows, merged cu_seqlens), handed to torch unchanged."""
    from sft_scenarios import case_kwargs
    golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "golden", "megatron-sft")
    case = os.path.join(golden, "cases", "boundary_L32")
    kw = case_kwargs(case)
    kw["data_path"] = [os.path.join(golden, p) for p in kw["data_path"]]
    kw["tokenizer_model"] = os.path.join(golden, kw["tokenizer_model"])
    with gridfeed.Feeder(comm=MPI.COMM_WORLD, micro_batch_size=3, global_batch_size=3,
                         **kw) as f:
        assert f.options["sft"] and f.options["sft_tokenizer_prompt_format"] == \
            "nemotron-h-aligned"
        for i in range(3):
            flat = os.path.join(case, "batches", "b0", "dp_rank_0", f"mb_{i:02d}", "flattened")
            mb = f.next()
            # The packed schema's fields, cu_seqlens and max_seqlen among them, as get_batch.
            assert mb.packed is True and list(mb) == ["tokens", "position_ids", "labels",
                                                      "loss_mask", "cu_seqlens", "max_seqlen"]
            assert (mb.micro_batch_size, mb.local_seq_length) == (3, 32)
            assert np.array_equal(mb["cu_seqlens"], mb.cu_seqlens)
            assert mb["max_seqlen"].dtype == np.int32 and mb["max_seqlen"].shape == (1,)
            assert int(mb["max_seqlen"][0]) == mb.max_seqlen and mb["max_seqlen"].base is mb
            for key in ["tokens", "labels", "loss_mask", "position_ids"]:
                want = np.load(os.path.join(flat, f"{key}.npy"))
                assert mb[key].dtype == want.dtype and mb[key].shape == want.shape == (1, 96)
                assert np.array_equal(mb[key], want), (i, key)
            want = np.load(os.path.join(flat, "cu_seqlens.npy"))[0]
            assert mb.cu_seqlens.dtype == np.int32 and np.array_equal(mb.cu_seqlens, want), i
            assert mb.max_seqlen == int(np.load(os.path.join(flat, "max_seqlen.npy"))[0]), i
            cu = torch.from_numpy(mb.cu_seqlens)
            assert cu.dtype == torch.int32 and cu.data_ptr() == mb.cu_seqlens.ctypes.data
            assert mb.cu_seqlens.base is mb and mb["tokens"].base is mb
            assert repr(mb).startswith("<gridfeed.MicroBatch packed [1 x 96] tokens"), repr(mb)


def test_fim_micro_batches_are_megatrons_dataloader_ones(monkeypatch):
    """fim_data=True at one rank with Megatron's default 2 DataLoader workers: the golden
    loader run l1 of case u16_L64_r05_spm05_1to1, micro-batch by micro-batch."""
    golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "golden", "megatron-fim")
    case = os.path.join(golden, "cases", "u16_L64_r05_spm05_1to1")
    i = json.load(open(os.path.join(case, "case.json")))["inputs"]
    monkeypatch.chdir(golden)  # the case's paths are relative to it
    kw = {"fim_data": True, "data_path": i["data_path"], "split": i["split"],
          "train_samples": i["sizes"][0], "valid_samples": i["sizes"][1],
          "test_samples": i["sizes"][2], "seq_length": i["seq_length"], "seed": i["seed"],
          "tokenizer_model": i["tokenizer_dir"], "special_tokens": i["special_tokens_arg"],
          "fim_rate": i["fim_rate"], "fim_spm_rate": i["fim_spm_rate"],
          "mid_level_dataset_surplus": float(i["mid_level_dataset_surplus"])}
    loader = os.path.join(case, "loaders", "l1", "dp_rank_0")
    with gridfeed.Feeder(comm=MPI.COMM_WORLD, micro_batch_size=4, global_batch_size=4,
                         **kw) as f:
        assert f.options["num_workers"] == 2
        for k in range(4):
            mb = f.next()
            assert list(mb.sample_indices) == list(np.load(f"{loader}/sample_indices.npy")[k])
            for key in ["tokens", "labels", "loss_mask", "position_ids"]:
                want = np.load(f"{loader}/{key}.npy")[k]
                assert mb[key].dtype == want.dtype and np.array_equal(mb[key], want), (k, key)


def test_views_share_the_batch_memory_and_outlive_it(job):
    f = open_feeder(job)
    mb = f.next()
    tokens = mb["tokens"]
    assert tokens.base is mb and not tokens.flags.owndata and tokens.flags.writeable
    t = torch.from_numpy(tokens)
    assert t.data_ptr() == tokens.ctypes.data
    t[0, 0] = -5  # through torch, seen in NumPy and in a fresh view of the same batch
    assert tokens[0, 0] == -5 and mb["tokens"][0, 0] == -5
    labels = torch.from_numpy(mb["labels"])
    kept = labels.clone()
    del mb, tokens
    gc.collect()
    for _ in range(8):  # later batches do not reuse the memory a live tensor views
        later = f.next()
        later["labels"][:] = 7
    f.close()
    assert torch.equal(labels, kept) and t[0, 0] == -5
    with pytest.raises(gridfeed.FailedPrecondition, match="closed"):
        f.next()
    f.close()  # closing twice is fine


def test_stop_iteration_at_the_end_of_the_split(job):
    with open_feeder(job) as f:
        assert f.split_length == 400
        steps = sum(1 for _ in f)  # the Feeder is an iterator
        assert steps == 400 // 2 and f.consumed_samples == 400
        with pytest.raises(StopIteration, match="split is exhausted"):
            f.next()


LONG_STAGE = """seq-length: 64
split: "969,30,1"
sources: {u16: corpora/corpus_u16, i32: corpora/corpus_i32}
schedule:
  - {name: main, samples: 8, mixture: {u16: 1, i32: 1}}
  - {name: long, samples: 8, seq_length: 128, mixture: {u16: 1, i32: 3}}
"""


def test_a_long_context_stage_gives_its_length_and_samples(tmp_path):
    cfg = tmp_path / "long.yaml"
    cfg.write_text(LONG_STAGE)
    with open_feeder(str(cfg)) as f:
        lengths = []
        for mb in f:
            length = 64 if mb.sample_positions[0] < 8 else 128
            assert mb.seq_length == mb.local_seq_length == length
            assert mb["tokens"].shape == mb["labels"].shape == (2, length)
            assert mb["loss_mask"].shape == (2, length)
            want = gridfeed.samples(list(mb.sample_positions), config=str(cfg))
            assert np.array_equal(mb["tokens"], want["tokens"])
            assert np.array_equal(mb["labels"], want["labels"])
            lengths.append(length)
        assert lengths == [64] * 4 + [128] * 4
    # Offline, positions of two lengths do not make one array.
    with pytest.raises(gridfeed.InvalidArgument, match="different seq lengths"):
        gridfeed.samples([7, 8], config=str(cfg))


def test_ledger_checkpoint_and_resume(job, gridfeed_bin, tmp_path):
    ckpt = str(tmp_path / "cursor.h5")
    with open_feeder(job, ledger=str(tmp_path / "ledger")) as f:
        for _ in range(2 * f.num_microbatches_per_global_batch):
            f.next()
        f.save_checkpoint(ckpt, iteration=2)
        after = [f.next().sample_indices.copy() for _ in range(2)]
    with open_feeder(job, resume_from=ckpt, ledger=str(tmp_path / "ledger")) as f:
        assert f.resumed_iteration == 2 and f.consumed_samples == 8
        resumed = [f.next().sample_indices.copy() for _ in range(2)]
        f.save_checkpoint(ckpt, iteration=3)
    assert all(np.array_equal(a, b) for a, b in zip(after, resumed))
    r = subprocess.run([gridfeed_bin, "audit", "verify", "--ledger", str(tmp_path / "ledger")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "[0, 12) consumed exactly once" in r.stdout, r.stdout + r.stderr
    # A checkpoint of another data order is refused, naming the field.
    with pytest.raises(gridfeed.FailedPrecondition, match="seed: 1234 -> 99"):
        open_feeder(job, resume=ckpt, seed=99)


def test_save_checkpoint_writes_only_what_resume_reads(job, tmp_path):
    """A refused argument raises before anything is written: the good checkpoint stays."""
    ckpt = tmp_path / "new" / "folder" / "cursor.h5"  # save_checkpoint creates the folder
    with open_feeder(job) as f:
        f.next()
        f.save_checkpoint(ckpt, iteration=1)
        good = ckpt.read_bytes()
        for bad in (-1, 2**40 + 1, 2**63, 2**70, 1.5, True, "2"):
            with pytest.raises(gridfeed.InvalidArgument, match="argument 'iteration'"):
                f.save_checkpoint(ckpt, iteration=bad)
        for bad in (str(ckpt) + "\0x", ""):
            with pytest.raises(gridfeed.InvalidArgument, match="argument 'path'"):
                f.save_checkpoint(bad, iteration=1)
        assert ckpt.read_bytes() == good
    with open_feeder(job, resume=str(ckpt)) as f:
        assert f.resumed_iteration == 1 and f.consumed_samples == 2


def test_no_checkpoint_counts_a_micro_batch_that_was_not_delivered(job, tmp_path):
    """A read error (injected at position 4) is caught by the trainer: the cursor must not be
    saved past what was handed over, so save_checkpoint refuses and the good one stays."""
    ckpt = tmp_path / "cursor.h5"
    with open_feeder(job, testing_fail_read_position=4) as f:
        f.next()
        f.next()  # positions 0..3
        f.save_checkpoint(ckpt, iteration=1)
        good = ckpt.read_bytes()
        with pytest.raises(gridfeed.Error):
            f.next()  # position 4 cannot be read
        with pytest.raises(gridfeed.Error, match="position 4|read"):
            f.save_checkpoint(ckpt, iteration=2)
        assert ckpt.read_bytes() == good


def test_errors_are_their_classes(job):
    with pytest.raises(gridfeed.NotFound, match="corpora/absent"):
        open_feeder(job, data_path=["corpora/absent"])
    with pytest.raises(gridfeed.InvalidArgument,
                       match=r"unknown keyword 'micro_batch' \(did you mean 'micro_batch_size'\?\)"):
        open_feeder(job, micro_batch=3)
    with pytest.raises(gridfeed.InvalidArgument, match="--global-batch-size"):
        open_feeder(job, global_batch_size=3)
    with pytest.raises(gridfeed.InvalidArgument, match="'comm' must be an mpi4py"):
        gridfeed.Feeder(comm=3, config=job)
