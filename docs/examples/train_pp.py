"""A training loop's data side with gridfeed at TP 2 x PP 2 (README, "Using gridfeed from
Python and PyTorch"). Runs as written after scripts/demo, from the repository root:

    export PYTHONPATH=$PWD/build/python
    mpirun -n 8 --oversubscribe /usr/bin/python3 docs/examples/train_pp.py

8 ranks = TP 2 x PP 2 x DP 2. Each pipeline stage reads only the fields it gets: the first
stage tokens and position_ids (+ attention_mask), the last stage labels and loss_mask (a
middle stage, with PP > 2, gets none). A first run starts fresh; a second one resumes from the
checkpoint the first saved (run it again with a larger --train-iters).
"""
import argparse
import os

import torch
from mpi4py import MPI

import gridfeed  # also: an uncaught exception on any rank ends the whole job (MPI_Abort)

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--config", default="configs/demo.yaml", help="gridfeed YAML (data options)")
p.add_argument("--train-iters", type=int, default=4)
p.add_argument("--save", default="out/train_pp", help="checkpoint folder (created when missing)")
args = p.parse_args()

world = MPI.COMM_WORLD
cursor = os.path.join(args.save, "cursor.h5")
# Every rank must pass the same options: rank 0 decides whether there is a checkpoint to resume
# (None on a first run).
resume = world.bcast(cursor if world.Get_rank() == 0 and os.path.exists(cursor) else None)

with gridfeed.Feeder(config=args.config, comm=world,
                     tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                     micro_batch_size=4, global_batch_size=16, resume=resume) as feeder:
    if feeder.world_rank == 0:
        print(f"{feeder.sizes}, starting at iteration {feeder.resumed_iteration}", flush=True)
    for step in range(feeder.resumed_iteration, args.train_iters):
        for _ in range(feeder.num_microbatches_per_global_batch):
            mb = feeder.next()  # collective on the TP group
            if feeder.is_first_stage:  # the model's input
                tokens = torch.from_numpy(mb["tokens"])  # no copy
                position_ids = torch.from_numpy(mb["position_ids"])
            if feeder.is_last_stage:  # the loss
                labels = torch.from_numpy(mb["labels"])
                loss_mask = torch.from_numpy(mb["loss_mask"])
            # ... this stage's forward and backward (activations through feeder.pp_comm) ...
        # ... the optimizer step; then the data cursor, collective (world rank 0 writes):
        feeder.save_checkpoint(cursor, iteration=step + 1)  # iterations done
        if feeder.world_rank == 0:
            print(f"iteration {step + 1} done, {feeder.consumed_samples} samples", flush=True)
# Leaving the with block closes the feeder on every rank (collective); left by an exception,
# it gives the feeder up locally instead and the exception ends the job.
