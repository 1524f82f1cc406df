#!/usr/bin/env python3
"""A small GPT in plain PyTorch, fed by gridfeed over a DP x TP x CP grid (PP = 1).

    mpirun -n 4 /usr/bin/python3 apps/torch_trainer/train.py --config job.yaml \
        --tensor-model-parallel-size 2 --micro-batch-size 4 --global-batch-size 16 \
        --train-iters 100 --save ckpt --save-interval 50 [--load ckpt] [--ledger DIR]
    srun --mpi=pmix -n 4 /usr/bin/python3 apps/torch_trainer/train.py ...

The Python twin of apps/toy_trainer: DP is a real gradient all-reduce over gridfeed's DP
communicator (mpi4py); TP and CP replicate the weights, but every step checks that TP peers got
identical micro-batches and reassembles the CP ranks' zigzag chunks into the full sequence.
Checkpoints hold the model and optimizer (torch.save) and gridfeed's HDF5 cursor; --load
resumes bit for bit. Every option of `gridfeed run` is a flag here too (gridfeed.option_table()).
"""
import argparse
import hashlib
import os
import signal
import sys

import numpy as np
import torch
from mpi4py import MPI

import gridfeed
from model import GPT, masked_loss


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    own = p.add_argument_group("trainer")
    own.add_argument("--save", default="", help="checkpoint folder")
    own.add_argument("--load", default="", help="resume from the latest checkpoint in this folder")
    own.add_argument("--loss-log", default="", help="append 'step<TAB>loss' lines (logging rank)")
    own.add_argument("--lr", type=float, default=1e-3)
    own.add_argument("--layers", type=int, default=2)
    own.add_argument("--d-model", type=int, default=128)
    own.add_argument("--testing-kill-after-step", type=int, default=-1, help=argparse.SUPPRESS)
    job = p.add_argument_group("gridfeed (the option table: gridfeed.option_table())")
    job.add_argument("--config", default=argparse.SUPPRESS, help="YAML file of these options")
    types = {"int": int, "float": float, "str": str}
    for row in gridfeed.option_table():
        kw = {"dest": row["keyword"], "default": argparse.SUPPRESS,
              "help": argparse.SUPPRESS if row["hidden"] else row["help"]}
        if row["type"] == "bool":
            kw["action"] = "store_true"
        elif row["type"] == "list":
            kw["nargs"] = "+"
        else:
            kw["type"] = types[row["type"]]
        job.add_argument(row["flag"], **kw)
    args = p.parse_args()
    keywords = {r["keyword"] for r in gridfeed.option_table()} | {"config"}
    options = {k: v for k, v in vars(args).items() if k in keywords}
    return args, options


class Stop(Exception):
    """An error every rank reached at the same point: end together, without MPI_Abort."""


def fail(message):
    """An error on this rank alone: the job ends from here (peers may wait in a collective)."""
    rank = MPI.COMM_WORLD.Get_rank()
    print(f"train.py: error (rank {rank}): {message}", file=sys.stderr, flush=True)
    MPI.COMM_WORLD.Abort(1)


def agree(comm, ok, message):
    """Collective: raises Stop on every rank unless every rank is ok."""
    failed = comm.allgather(None if ok else message)
    bad = [(r, m) for r, m in enumerate(failed) if m is not None]
    if bad:
        raise Stop(f"rank {bad[0][0]}: {bad[0][1]}")


def reassemble(local, feeder):
    """[b, S/cp] zigzag chunks of every CP rank -> [b, S] (chunk c of 2cp lives on rank c, first
    half of its slice, or on rank 2cp-1-c, second half)."""
    cp = feeder.cp_size
    if cp == 1:
        return local
    local = np.ascontiguousarray(local)
    everything = np.empty((cp,) + local.shape, dtype=local.dtype)
    feeder.cp_comm.Allgather(local, everything)
    half = local.shape[1] // 2
    pieces = []
    for c in range(2 * cp):
        r, h = (c, 0) if c < cp else (2 * cp - 1 - c, 1)
        pieces.append(everything[r][:, h * half:(h + 1) * half])
    return np.concatenate(pieces, axis=1)


def check_tp_peers(mb, feeder):
    digest = hashlib.blake2b(mb.sample_indices.tobytes())
    for key, value in mb.items():
        digest.update(key.encode())
        digest.update(value.tobytes())
    if len(set(feeder.tp_comm.allgather(digest.hexdigest()))) != 1:
        fail("TP peers received different micro-batches")


def parameter_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def publish(path, text):
    """Atomically: a complete file or none (written beside, fsynced, renamed, folder fsynced)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(args, feeder, model, opt, step):
    world = feeder.world_comm
    name = f"step{step}"
    folder = os.path.join(args.save, name)
    error = None
    if world.Get_rank() == 0:
        try:
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f"model.pt.tmp{os.getpid()}")
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
            os.replace(tmp, os.path.join(folder, "model.pt"))
        except OSError as e:
            error = f"cannot save the model to '{folder}': {e}"
    agree(world, error is None, error)
    feeder.save_checkpoint(os.path.join(folder, "gridfeed.h5"), iteration=step)
    error = None
    if world.Get_rank() == 0:  # the checkpoint counts only once complete
        try:
            publish(os.path.join(args.save, "latest"), name + "\n")
        except OSError as e:
            error = f"cannot publish '{args.save}/latest': {e}"
    agree(world, error is None, error)
    if step == args.testing_kill_after_step and world.Get_rank() == 1 % world.Get_size():
        os.kill(os.getpid(), signal.SIGKILL)


def train(args, options):
    world = MPI.COMM_WORLD
    # The trainer's own options decide collectives (saves, loads): every rank must agree.
    mine = (args.save, args.load, args.testing_kill_after_step)
    agree(world, len(set(world.allgather(mine))) == 1,
          "the ranks were given different --save, --load or testing options")
    latest = ""
    if args.load:
        try:
            with open(os.path.join(args.load, "latest")) as f:
                latest = f.readline().strip()
        except OSError:
            pass
        agree(world, latest and "/" not in latest,
              f"no checkpoint in '{args.load}' (missing or empty 'latest')")
        options["resume"] = os.path.join(args.load, latest, "gridfeed.h5")
    feeder = gridfeed.Feeder(comm=world, **options)  # collective; the same error everywhere
    try:
        return run(args, feeder, latest)
    except Stop as e:
        stop = e
    # Every rank stopped at the same point: a collective close, outside the except block (a
    # close() while an exception is handled is this rank's alone, and the job would then end
    # through gridfeed's exit check).
    feeder.close()
    raise stop


def run(args, feeder, latest):
    agree(feeder.world_comm, feeder.pp_size == 1,
          "this trainer keeps the whole model on every rank: use --pipeline-model-parallel-size 1")
    o = feeder.options
    torch.manual_seed(1234)  # the same initial weights on every rank
    model = GPT(o["vocab_size"] or 8000, o["seq_length"], d_model=args.d_model, layers=args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    if latest:
        state = torch.load(os.path.join(args.load, latest, "model.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
    logger = feeder.tp_rank == 0 and feeder.cp_rank == 0 and feeder.dp_rank == 0
    log = open(args.loss_log, "a") if logger and args.loss_log else None
    dp_comm, dp = feeder.dp_comm, feeder.dp_size
    micro = feeder.num_microbatches_per_global_batch
    train_iters, interval = o["train_iters"], o["save_interval"]
    for step in range(feeder.resumed_iteration, train_iters):
        opt.zero_grad()
        total = 0.0
        for _ in range(micro):
            try:
                mb = feeder.next()
            except StopIteration as e:  # at the same step on every rank
                raise Stop(f"{e} at iteration {step} (lower --train-iters)") from None
            except gridfeed.Error as e:  # not agreed (e.g. this rank's ledger file)
                fail(f"{type(e).__name__}: {e}")
            check_tp_peers(mb, feeder)
            tokens = torch.from_numpy(reassemble(mb["tokens"], feeder))  # no copy when cp == 1
            positions = torch.from_numpy(reassemble(mb["position_ids"], feeder))
            labels = torch.from_numpy(reassemble(mb["labels"], feeder))
            mask = torch.from_numpy(reassemble(mb["loss_mask"], feeder))
            loss = masked_loss(model(tokens, positions), labels, mask) / micro
            loss.backward()
            total += loss.item()
        for p in model.parameters():  # data parallel: average the gradients
            if p.grad is not None:
                dp_comm.Allreduce(MPI.IN_PLACE, p.grad.numpy(), op=MPI.SUM)
                p.grad.div_(dp)
        opt.step()
        total = dp_comm.allreduce(total, op=MPI.SUM) / dp
        if logger:
            print(f"step {step + 1} loss {total:.6f}", flush=True)
            if log:
                log.write(f"{step + 1}\t{total!r}\n")
                log.flush()
        end = step + 1 == train_iters
        if args.save and (end or (interval > 0 and (step + 1) % interval == 0)):
            save(args, feeder, model, opt, step + 1)
    if log:
        log.write(f"params\t{parameter_hash(model)}\n")  # for bitwise comparisons between runs
        log.close()
    feeder.close()  # collective: every rank gets here
    return 0


def main():
    args, options = parse_args()
    torch.set_num_threads(1)
    try:
        return train(args, options)
    except (gridfeed.Error, Stop) as e:  # agreed: every rank reports it and ends together
        rank = MPI.COMM_WORLD.Get_rank()
        print(f"train.py: error (rank {rank}): {type(e).__name__}: {e}", file=sys.stderr,
              flush=True)
        MPI.COMM_WORLD.Barrier()
        return 1
    except BaseException as e:  # this rank alone: peers may wait in a collective
        fail(f"unexpected: {type(e).__name__}: {e}")


if __name__ == "__main__":
    sys.exit(main())
