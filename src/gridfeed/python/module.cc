// The `gridfeed` Python module: the feeder for PyTorch training loops under mpirun and srun,
// and the offline functions, over the same option table, errors and fingerprints as the
// command line. See feeder_binding.h and offline_binding.h for the contracts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "gridfeed/config/options.h"
#include "gridfeed/python/errors.h"
#include "gridfeed/python/feeder_binding.h"
#include "gridfeed/python/job_abort.h"
#include "gridfeed/python/kwargs.h"
#include "gridfeed/python/offline_binding.h"

namespace py = pybind11;

PYBIND11_MODULE(gridfeed, m) {
  m.doc() =
      "gridfeed: an MPI-native data feeder for LLM pretraining (Megatron-compatible order).\n"
      "Feeder(comm=..., config=..., **options) feeds a training loop; tables, samples and replay\n"
      "answer offline. Keywords are the option table's names with underscores.";
  // pybind11 looks NumPy's C API up lazily in a function-local static, under the GIL: the first
  // NumPy views made from two threads at once deadlock there (one waits for the static's guard
  // holding the GIL, the other for the GIL inside the import). Looked up here, once.
  pybind11::detail::npy_api::get();
  pybind11::dtype::of<int64_t>();
  // So is what next() looks up on its first call (the signal module: job_abort.h).
  gridfeed::python::SigintIsPythonsDefault();
  // An uncaught exception on one rank ends the job instead of hanging it (job_abort.h).
  gridfeed::python::InstallExceptHook(m);
  // So does a rank ending (sys.exit, SystemExit, its script's end) with a Feeder not closed.
  gridfeed::python::InstallExitHook(m);
  gridfeed::python::RegisterErrors(m);
  gridfeed::python::RegisterFeeder(m);
  gridfeed::python::RegisterOffline(m);
  m.def("option_table", &gridfeed::python::OptionTableList,
        "Every option: keyword, flag, type, default, group, help, choices, decides_order, hidden");
  m.def(
      "options",
      [](py::kwargs kwargs) {
        auto o = gridfeed::python::OptionsFromKwargs("gridfeed.options", kwargs,
                                                     gridfeed::config::Groups::All());
        gridfeed::python::ThrowIfError(o.status());
        gridfeed::python::ThrowIfError(gridfeed::config::Validate(*o));
        return gridfeed::python::OptionsDict(*o, gridfeed::config::Groups::All());
      },
      "The options a Feeder with these keywords would use, validated as the CLI validates them "
      "(no MPI)");
  m.def(
      "error_class",
      [](const std::string& name) {
        for (int c = 1; c <= static_cast<int>(gridfeed::StatusCode::kInternal); ++c) {
          const auto code = static_cast<gridfeed::StatusCode>(c);
          if (gridfeed::StatusCodeName(code) == name) return gridfeed::python::ErrorClass(code);
        }
        throw py::key_error(name);
      },
      "The exception class of a Status code name (as StatusCodeName spells it)");
  m.def(
      "_raise_status",
      [](const std::string& name, const std::string& message) {
        for (int c = 1; c <= static_cast<int>(gridfeed::StatusCode::kInternal); ++c) {
          const auto code = static_cast<gridfeed::StatusCode>(c);
          if (gridfeed::StatusCodeName(code) == name) {
            gridfeed::python::ThrowIfError(gridfeed::Status(code, message));
          }
        }
        throw py::key_error(name);
      },
      "Tests only: raises the exception a Status of this code becomes");
  m.attr("__version__") = "0.1.0";
}
