// gridfeed's Status codes as Python exceptions: one class per code (gridfeed.InvalidArgument,
// gridfeed.DataLoss, ...) under a common base, gridfeed.Error; InvalidArgument is also a
// ValueError. The message is the Status message unchanged, so an error agreed over MPI reads
// the same on every rank. End of split (OutOfRange from Feeder.next) is StopIteration instead.
// Call RegisterErrors once at import; ThrowIfError from any bound function (holding the GIL).
#pragma once

#include <pybind11/pybind11.h>

#include "gridfeed/core/status.h"

namespace gridfeed::python {

// Adds gridfeed.Error and one subclass per non-OK StatusCode to `m`.
void RegisterErrors(pybind11::module_& m);

// Raises the Python exception of `status` (with its message) unless it is OK.
// REQUIRES: the GIL is held.
void ThrowIfError(const Status& status);

// The exception class of `code` (for tests: gridfeed.error_class_of(name)).
pybind11::object ErrorClass(StatusCode code);

}  // namespace gridfeed::python
