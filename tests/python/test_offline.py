"""gridfeed's Python surface without MPI: the keywords against the option table, errors as
exception classes, and tables / samples / replay equal to the command line's outputs."""
import json
import os
import subprocess

import numpy as np
import pytest

import gridfeed

DATA = {"data_path": ["0.3", "corpora/corpus_u16", "0.7", "corpora/corpus_i32"],
        "split": "969,30,1", "seq_length": 64, "train_samples": 400, "valid_samples": 40,
        "test_samples": 10, "create_attention_mask": True}
FLAGS = ["--data-path", "0.3", "corpora/corpus_u16", "0.7", "corpora/corpus_i32", "--split",
         "969,30,1", "--seq-length", "64", "--train-samples", "400", "--valid-samples", "40",
         "--test-samples", "10", "--create-attention-mask"]


def cli(gridfeed_bin, *args):
    r = subprocess.run([gridfeed_bin, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


# ---- keywords ------------------------------------------------------------------------------

def a_value(row):
    """A valid value other than the default, per type."""
    if row["choices"]:
        return next(c for c in row["choices"] if c != row["default"])
    if row["type"] == "int":
        return row["default"] + 3
    return {"float": 0.25, "bool": not row["default"], "str": "x/y.h5",
            "list": ["a.npy"]}[row["type"]]


def test_every_option_of_the_table_is_a_keyword():
    rows = gridfeed.option_table()
    assert len(rows) >= 40
    resolved = gridfeed.options(**DATA)
    assert set(resolved) == {r["keyword"] for r in rows}
    for row in rows:
        assert row["keyword"] == row["flag"][2:].replace("-", "_")
        given = DATA.get(row["keyword"], row["default"])
        if row["type"] == "str" and row["keyword"].endswith("_samples"):
            given = str(given)  # "N or none": a string field that takes an integer
        assert resolved[row["keyword"]] == given, row
        value = a_value(row)
        if row["keyword"] in ("split", "train_samples", "valid_samples", "test_samples",
                              "data_path", "seq_length", "seed"):
            continue  # set above or changes validity; each is checked below
        # OLMo's rows go with an OLMo order (exclusive with Megatron's data paths)
        base = ({"seq_length": 64, "olmo_paths": ["x.npy"]} if row["keyword"].startswith("olmo_")
                else DATA)
        try:
            got = gridfeed.options(**{**base, row["keyword"]: value})[row["keyword"]]
        except gridfeed.InvalidArgument as e:
            # a check across fields that names this option: the value reached it
            assert row["flag"] in str(e) and "keyword" not in str(e), (row, str(e))
            continue
        assert got == value, row


def test_data_keywords_set_their_fields():
    o = gridfeed.options(**{**DATA, "seed": 99, "split": "98,2,0", "train_samples": None})
    assert (o["seed"], o["split"], o["train_samples"]) == (99, "98,2,0", "none")
    assert o["data_path"] == DATA["data_path"]
    assert gridfeed.options(**{**DATA, "data_path": "corpora/corpus_u16"})["data_path"] == [
        "corpora/corpus_u16"]
    assert gridfeed.options(**{**DATA, "data_path": [0.3, "a", 0.7, "b"]})["data_path"] == [
        "0.3", "a", "0.7", "b"]
    # resume_from: the C++ field's name, as the example spells it
    assert gridfeed.options(**DATA, resume_from="c.h5")["resume"] == "c.h5"


def test_unknown_keyword_raises_naming_it():
    with pytest.raises(gridfeed.InvalidArgument, match="unknown keyword 'seq_len'"):
        gridfeed.options(**DATA, seq_len=3)
    with pytest.raises(ValueError):  # InvalidArgument is also a ValueError
        gridfeed.options(**DATA, bogus=1)
    with pytest.raises(gridfeed.InvalidArgument, match="not an option of gridfeed.tables"):
        gridfeed.tables(**DATA, train_iters=2)


def test_wrong_types_name_keyword_and_flag():
    with pytest.raises(gridfeed.InvalidArgument,
                       match=r"keyword 'seq_length' \(--seq-length\) must be an integer"):
        gridfeed.options(**{**DATA, "seq_length": "64"})
    with pytest.raises(gridfeed.InvalidArgument, match=r"\(--create-attention-mask\) must be True"):
        gridfeed.options(**{**DATA, "create_attention_mask": 1})
    with pytest.raises(gridfeed.InvalidArgument, match=r"--seq-length\) must be an integer"):
        gridfeed.options(**{**DATA, "seq_length": 2**70})


def test_validation_errors_are_the_cli_messages(gridfeed_bin, tmp_path):
    bad = {**DATA, "seed": -1}
    with pytest.raises(gridfeed.InvalidArgument) as e:
        gridfeed.tables(**bad)
    flags = [f if f != "1234" else "-1" for f in FLAGS] + ["--seed", "-1"]
    rc, _, err = cli(gridfeed_bin, "tables", *flags, "--out", str(tmp_path))
    assert rc != 0 and str(e.value) in err, (str(e.value), err)
    assert str(e.value) == "--seed must be in [0, 2^32), got -1"


def test_config_file_then_keywords(job):
    o = gridfeed.options(config=job, seed=7)
    assert o["seed"] == 7 and o["seq_length"] == 64 and o["create_attention_mask"] is True
    with pytest.raises(gridfeed.NotFound, match="missing.yaml"):
        gridfeed.options(config="missing.yaml")


def test_every_status_code_has_its_class():
    names = ["InvalidArgument", "NotFound", "DataLoss", "FailedPrecondition", "IoError",
             "Aborted", "OutOfRange", "Internal"]
    for name in names:
        cls = getattr(gridfeed, name)
        assert issubclass(cls, gridfeed.Error) and cls.code == name
        assert gridfeed.error_class(name) is cls
        with pytest.raises(cls, match="^the message$"):
            gridfeed._raise_status(name, "the message")
    assert len({getattr(gridfeed, n) for n in names}) == len(names)


def test_real_errors_map_to_their_classes(tmp_path):
    with pytest.raises(gridfeed.NotFound, match="corpora/absent"):
        gridfeed.tables(**{**DATA, "data_path": ["corpora/absent"]})
    (tmp_path / "bad.idx").write_bytes(b"MMIDIDX\x00\x00" + b"\x00" * 20)
    (tmp_path / "bad.bin").write_bytes(b"")
    with pytest.raises(gridfeed.DataLoss, match="bad.idx"):
        gridfeed.tables(**{**DATA, "data_path": [str(tmp_path / "bad")]})
    with pytest.raises(gridfeed.OutOfRange, match="beyond the split's"):
        gridfeed.samples([10**6], **DATA)


# ---- offline functions against the command line ----------------------------------------------

def test_tables_equal_the_cli(gridfeed_bin, tmp_path):
    rc, out, err = cli(gridfeed_bin, "tables", *FLAGS, "--out", str(tmp_path))
    assert rc == 0, err
    summary = json.load(open(tmp_path / "summary.json"))
    ours = gridfeed.tables(**DATA)
    for split in ("train", "valid", "test"):
        s, t = summary[split], ours[split]
        for key in ("type", "length", "weights", "epochs", "separate_final_epoch"):
            assert s[key] == t[key], (split, key)
        for k, (sm, tm) in enumerate(zip(s["mid"], t["mid"], strict=True)):
            for key in ("dataset_path", "num_tokens_per_epoch", "epochs", "length"):
                assert sm[key] == tm[key], (split, k, key)
            for table in ("document_index", "sample_index", "shuffle_index"):
                want = np.load(tmp_path / split / f"mid_{k}" / f"{table}.npy")
                assert tm[table].dtype == want.dtype and np.array_equal(tm[table], want)
        for table in ("dataset_index", "dataset_sample_index"):
            want = np.load(tmp_path / split / "blend" / f"{table}.npy")
            got = t["blend"][table]
            assert got.dtype == want.dtype and np.array_equal(got, want), (split, table)


def test_a_data_args_file_gives_the_inline_lists_tables(tmp_path):
    """data_args_path (Megatron's --data-args-path) is read as the command line reads it."""
    args = tmp_path / "data_args.txt"
    args.write_text(" ".join(DATA["data_path"]) + "\n")
    inline = gridfeed.tables(**DATA)
    kw = {k: v for k, v in DATA.items() if k != "data_path"}
    from_file = gridfeed.tables(**kw, data_args_path=str(args))
    for split in ("train", "valid", "test"):
        for table in ("dataset_index", "dataset_sample_index"):
            assert np.array_equal(inline[split]["blend"][table], from_file[split]["blend"][table])
    with pytest.raises(gridfeed.InvalidArgument, match="--data-args-path"):
        gridfeed.tables(**kw, data_args_path=str(tmp_path / "missing.txt"))


def test_samples_equal_the_cli(gridfeed_bin, tmp_path):
    rc, _, err = cli(gridfeed_bin, "samples", *FLAGS, "--split-name", "valid", "--positions",
                     "0:5,17,3", "--out", str(tmp_path))
    assert rc == 0, err
    ours = gridfeed.samples([0, 1, 2, 3, 4, 17, 3], split_name="valid", **DATA)
    names = sorted(f[:-4] for f in os.listdir(tmp_path))
    assert names == sorted(ours) and "dataset_id" in names and "attention_mask" in names
    for name in names:
        want = np.load(tmp_path / f"{name}.npy")
        assert ours[name].dtype == want.dtype and np.array_equal(ours[name], want), name
    assert np.array_equal(gridfeed.samples(range(5), **DATA)["tokens"],
                          gridfeed.samples(np.arange(5), **DATA)["tokens"])


OLMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "olmo", "corpora")


def olmo_config(tmp_path):
    """An OLMo training YAML (JSON is YAML) over the golden OLMo corpus, absolute paths."""
    files = [os.path.join(OLMO, "u16", f"part-00{k}.npy") for k in range(3)]
    cfg = {"seed": 11, "global_train_batch_size": 4, "device_train_microbatch_size": 2,
           "model": {"max_sequence_length": 64, "eos_token_id": 50279, "pad_token_id": 1},
           "data": {"paths": files, "label_mask_paths": [f[:-4] + ".mask.npy" for f in files],
                    "generate_attention_mask": True, "generate_doc_lengths": True,
                    "instance_filter": {}}}
    path = tmp_path / "olmo.yaml"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_olmo_tables_and_samples_equal_the_cli(gridfeed_bin, tmp_path):
    config = olmo_config(tmp_path)
    rc, _, err = cli(gridfeed_bin, "tables", "--config", config, "--data-parallel-size", "2",
                     "--out", str(tmp_path / "t"))
    assert rc == 0, err
    ours = gridfeed.tables(config=config, data_parallel_size=2)
    want = np.load(tmp_path / "t" / "global_indices.npy")
    assert ours["global_indices"].dtype == want.dtype == np.uint32
    assert np.array_equal(ours["global_indices"], want)
    assert ours["summary"] == json.load(open(tmp_path / "t" / "summary.json"))
    rc, _, err = cli(gridfeed_bin, "samples", "--config", config, "--positions", "0:4,-1,7",
                     "--out", str(tmp_path / "s"))
    assert rc == 0, err
    got = gridfeed.samples([0, 1, 2, 3, -1, 7], config=config)
    names = sorted(f[:-4] for f in os.listdir(tmp_path / "s") if f.endswith(".npy"))
    assert names == sorted(k for k in got if k != "metadata") and "doc_lens_flat" in names
    for name in names:
        w = np.load(tmp_path / "s" / f"{name}.npy")
        assert got[name].dtype == w.dtype and np.array_equal(got[name], w), name
    assert got["metadata"] == json.load(open(tmp_path / "s" / "metadata.json"))
    with pytest.raises(gridfeed.OutOfRange, match="out of bounds"):
        gridfeed.samples([10**6], config=config)


def records_of(tsv):
    rows = [l.split("\t") for l in open(tsv).read().splitlines()[1:]]
    return [tuple(int(x) for x in r[:8]) + (int(r[8], 16),) for r in rows]


def test_replay_equals_the_cli(gridfeed_bin, job, tmp_path):
    geometry = ["--data-parallel-size", "2", "--micro-batch-size", "2", "--global-batch-size", "8"]
    rc, _, err = cli(gridfeed_bin, "audit", "replay", "--config", job, *geometry, "--steps", "1:4",
                     "--out", str(tmp_path))
    assert rc == 0, err
    ours = gridfeed.replay(job, steps="1:4", data_parallel_size=2, micro_batch_size=2,
                           global_batch_size=8)
    assert len(ours) == 2
    for r, got in enumerate(ours):
        want = np.load(tmp_path / f"dp_rank{r}" / "sample_indices.npy")
        assert got["sample_indices"].shape == (6, 2)  # 3 iterations x 2 micro-batches
        assert np.array_equal(got["sample_indices"], want)
        records = [tuple(int(x) for x in rec) for rec in got["records"]]
        assert records == records_of(tmp_path / f"dp_rank{r}" / "records.tsv")
    same = gridfeed.replay(config=job, steps=(1, 4), data_parallel_size=2, micro_batch_size=2,
                           global_batch_size=8)
    assert np.array_equal(same[1]["records"], ours[1]["records"])
    with pytest.raises(gridfeed.InvalidArgument, match="data_parallel_size must be given"):
        gridfeed.replay(job, steps="0:1")
    with pytest.raises(gridfeed.InvalidArgument, match="argument 'steps' must be"):
        gridfeed.replay(job, steps="3:1", data_parallel_size=2)


@pytest.mark.parametrize("steps", [(0, 2**70), 2**70, (-2**70, 1), range(0, 2**70),
                                   (0, 2**41), "0:99999999999999999999", (True, 2)])
def test_replay_bounds_its_steps_and_names_them(job, steps):
    with pytest.raises(gridfeed.InvalidArgument, match="gridfeed.replay: argument 'steps'"):
        gridfeed.replay(job, steps=steps, data_parallel_size=2, micro_batch_size=2)


def test_replay_of_a_ledger_equals_the_cli(gridfeed_bin, job, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    r = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", gridfeed_bin, "run",
                        "--config", job, "--micro-batch-size", "2", "--global-batch-size", "8",
                        "--train-iters", "3", "--ledger", str(tmp_path / "ledger")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    rc, _, err = cli(gridfeed_bin, "audit", "replay", "--ledger", str(tmp_path / "ledger"),
                     "--steps", "0:3", "--out", str(tmp_path / "cli"))
    assert rc == 0, err
    ours = gridfeed.replay(tmp_path / "ledger", steps="0:3")
    for dp, got in enumerate(ours):
        want = np.load(tmp_path / "cli" / f"dp_rank{dp}" / "sample_indices.npy")
        assert np.array_equal(got["sample_indices"], want)
        assert [tuple(int(x) for x in rec) for rec in got["records"]] == records_of(
            tmp_path / "cli" / f"dp_rank{dp}" / "records.tsv")
        # ... and what the run recorded (the ledger's own lines)
        ledger = [l.split("\t") for l in open(tmp_path / "ledger" / f"dp{dp}.tsv")
                  if l[0].isdigit()]
        assert [int(l[3]) for l in ledger] == list(got["sample_indices"].ravel())


def test_offline_functions_do_not_initialise_mpi():
    import sys
    assert "mpi4py.MPI" not in sys.modules  # importing it would initialise MPI


# ---- every pipeline through the registry: SFT and FIM samples are Megatron's ---------------

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")


def kwargs_from_flags(flags):
    """Command-line flags (as the golden cases' flag scripts print them) as keywords, typed by
    the option table."""
    rows = {r["flag"]: r for r in gridfeed.option_table()}
    kw, i = {}, 0
    while i < len(flags):
        row = rows[flags[i]]
        values = []
        i += 1
        while i < len(flags) and not (flags[i].startswith("--") and flags[i] in rows):
            values.append(flags[i])
            i += 1
        cast = {"int": int, "float": float, "str": str}.get(row["type"])
        if row["type"] == "bool":
            kw[row["keyword"]] = True
        elif row["type"] == "list":
            kw[row["keyword"]] = values
        else:
            kw[row["keyword"]] = cast(values[0])
    return kw


def golden_flags(kind, case_dir):
    import importlib.util
    script = os.path.join(GOLDEN, "..", "cli", f"{kind}_golden_flags.py")
    spec = importlib.util.spec_from_file_location(f"{kind}_golden_flags", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(os.path.join(case_dir, "case.json")) as fh:
        return module.flags(json.load(fh))


@pytest.mark.parametrize("case", ["boundary_L32", "cp2_h_aligned_L128", "nano_v2_L128_split"])
def test_sft_samples_are_megatrons(case, monkeypatch):
    root = os.path.join(GOLDEN, "megatron-sft")
    items = os.path.join(root, "cases", case, "train", "items")
    monkeypatch.chdir(root)  # the case's paths are relative to the set's folder
    kw = kwargs_from_flags(golden_flags("sft", os.path.join(root, "cases", case)))
    want_index = np.load(os.path.join(items, "items_index.npy"))
    ours = gridfeed.samples(want_index, **kw)
    for f in sorted(os.listdir(items)):
        want = np.load(os.path.join(items, f))
        got = ours[f[:-4]]
        assert got.dtype == want.dtype and np.array_equal(got, want), (case, f)
    tables = gridfeed.tables(**kw)
    assert tables["train"]["length"] >= int(want_index.max()) + 1


@pytest.mark.parametrize("case", ["u16_L64_r05_spm05_1to1", "i32_L64_split_frag"])
def test_fim_samples_in_fetch_order_are_megatrons(case, monkeypatch):
    root = os.path.join(GOLDEN, "megatron-fim")
    items = os.path.join(root, "cases", case, "train", "items")
    monkeypatch.chdir(root)
    kw = kwargs_from_flags(golden_flags("fim", os.path.join(root, "cases", case)))
    order = np.load(os.path.join(items, "fetch_order.npy"))
    ours = gridfeed.samples(order, **kw)
    assert np.array_equal(ours["items_index"], order)
    for f in ("tokens.npy", "labels.npy", "position_ids.npy", "window_before_fim.npy"):
        want = np.load(os.path.join(items, f))
        assert np.array_equal(ours[f[:-4]], want), (case, f)
    # A fresh stream per call: the same positions again give the same samples.
    again = gridfeed.samples(order, **kw)
    assert np.array_equal(again["tokens"], ours["tokens"])


# ---- tokenizers ----------------------------------------------------------------------------

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "hf-tokenizers")


def test_megatron_tokenizer_keywords_give_the_golden_sft_samples():
    """tokenizer_type and its companions are keywords (from the option table); an SFT case of
    the Hugging Face golden set through them gives Megatron's items."""
    from sft_scenarios import case_kwargs
    sft = os.path.join(HF, "sft")
    case = os.path.join(sft, "cases", "default_phi3mini_L96")
    kw = case_kwargs(case)
    kw["data_path"] = [os.path.join(sft, p) for p in kw["data_path"]]
    kw["tokenizer_model"] = os.path.join(sft, kw["tokenizer_model"])
    opts = gridfeed.options(**kw, tokenizer_type="HuggingFaceTokenizer")
    assert opts["tokenizer_type"] == "HuggingFaceTokenizer"
    assert opts["tiktoken_num_special_tokens"] == 1000 and opts["tokenizer_special_tokens"] == []
    items = os.path.join(case, "train", "items")
    positions = np.load(os.path.join(items, "items_index.npy"))
    got = gridfeed.samples(positions, **kw, tokenizer_type="HuggingFaceTokenizer")
    for name in ("tokens", "labels", "loss_mask", "position_ids"):
        want = np.load(os.path.join(items, f"{name}.npy"))
        assert np.array_equal(got[name], want), name
    with pytest.raises(gridfeed.InvalidArgument, match="--vocab-file"):
        gridfeed.samples([0], **{**kw, "tokenizer_model": None},
                         tokenizer_type="GPT2BPETokenizer")
