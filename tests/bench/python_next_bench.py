"""The trainer thread's cost of gridfeed.Feeder.next() + the array views (Python) against the
C++ Feeder::Next() on the same feeder in the same run. The prefetch queue is filled before
each timed round, so both sides measure the hand-over, not the assembly. Prints the figures
and their difference; asserts nothing about time.

    mpirun -n 1 /usr/bin/python3 tests/bench/python_next_bench.py tests/golden/megatron
"""
import statistics
import sys
import time

from mpi4py import MPI

import gridfeed

DEPTH = 64  # micro-batches per timed round (the prefetch depth)
ROUNDS = 15


def main(golden):
    results = {}
    for mbs, seq in ((1, 64), (4, 1024)):
        feeder = gridfeed.Feeder(
            comm=MPI.COMM_WORLD, data_path=[f"{golden}/corpora/corpus_u16"], split="969,30,1",
            seq_length=seq, train_samples=DEPTH * mbs * 2 * ROUNDS + 64, micro_batch_size=mbs,
            prefetch_depth=DEPTH)
        cxx, py = [], []
        for _ in range(ROUNDS):
            time.sleep(0.2)  # the prefetch thread fills the queue
            cxx.append(feeder._time_cxx_next(DEPTH) / DEPTH)
            time.sleep(0.2)
            start = time.perf_counter()
            for _ in range(DEPTH):
                mb = feeder.next()
                views = [mb[k] for k in mb]  # every field as a NumPy view
                views.append(mb.sample_indices)
            py.append((time.perf_counter() - start) / DEPTH)
        feeder.close()
        results[(mbs, seq)] = (statistics.median(cxx), statistics.median(py))
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("python_next_bench: per micro-batch on the trainer's thread (median of "
              f"{ROUNDS} rounds of {DEPTH}; one rank, so no TP broadcast)")
        for (mbs, seq), (c, p) in results.items():
            print(f"  mbs {mbs} x seq {seq:5d}: C++ Next() {c * 1e6:7.1f} us, Python next() + "
                  f"views {p * 1e6:7.1f} us, difference {(p - c) * 1e6:6.1f} us "
                  f"(ratio {p / c:.2f})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/megatron")
