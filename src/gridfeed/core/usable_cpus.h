// How many CPUs this process may run on: its affinity mask (what mpirun --bind-to, srun
// --cpu-bind or taskset leave it), not the machine's count, so a rank bound to two cores of a
// 128-core node sizes its thread pools for two. Thread safe.
#pragma once

namespace gridfeed {

// CPUs in sched_getaffinity's mask; std::thread::hardware_concurrency() where it fails; >= 1.
unsigned UsableCpus();

}  // namespace gridfeed
