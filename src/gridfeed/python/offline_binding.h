// Offline functions (no MPI; nothing is initialised): the results of `gridfeed tables`,
// `gridfeed samples` and `gridfeed audit replay` as NumPy arrays, through the same option
// table, pipeline, table view and read schedule as those commands.
//   gridfeed.tables(config=..., **data options) -> {"train": {...}, "valid": ..., "test": ...}
//   gridfeed.samples(positions, config=..., split_name="train", **data options) -> {...}
//   gridfeed.replay(ledger_or_config, steps="A:B", data_parallel_size=..., ...) -> [per DP rank]
// Each call builds its tables; arrays are views over buffers the returned objects own.
// Thread safety: the GIL is released while tables are built; calls share no state.
#pragma once

#include <pybind11/pybind11.h>

namespace gridfeed::python {

void RegisterOffline(pybind11::module_& m);

}  // namespace gridfeed::python
