#include "gridfeed/python/errors.h"

#include <string>

namespace gridfeed::python {
namespace py = pybind11;
namespace {

struct ErrorRow {
  StatusCode code;
  const char* name;
  const char* doc;
};

constexpr ErrorRow kErrors[] = {
    {StatusCode::kInvalidArgument, "InvalidArgument", "A bad option, keyword or value."},
    {StatusCode::kNotFound, "NotFound", "A file that does not exist."},
    {StatusCode::kDataLoss, "DataLoss", "A corrupt or tampered file."},
    {StatusCode::kFailedPrecondition, "FailedPrecondition",
     "State that does not fit (ranks with other options, a checkpoint of another order)."},
    {StatusCode::kIoError, "IoError", "The operating system refused (disk full, permissions)."},
    {StatusCode::kAborted, "Aborted", "A peer failed."},
    {StatusCode::kOutOfRange, "OutOfRange", "A position or step beyond the split."},
    {StatusCode::kInternal, "Internal", "A bug that was caught."},
};

// Owned by the module (kept alive by its attributes); filled once at import.
PyObject* g_classes[static_cast<int>(StatusCode::kInternal) + 1] = {};

}  // namespace

void RegisterErrors(py::module_& m) {
  py::object base = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "gridfeed.Error", "Base of every gridfeed error; .code names the Status code.",
      PyExc_Exception, nullptr));
  if (!base) throw py::error_already_set();
  m.attr("Error") = base;
  for (const ErrorRow& row : kErrors) {
    py::object bases = row.code == StatusCode::kInvalidArgument
                           ? py::object(py::make_tuple(base, py::handle(PyExc_ValueError)))
                           : py::object(base);
    const std::string qualified = std::string("gridfeed.") + row.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), row.doc, bases.ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    py::object owned = py::reinterpret_steal<py::object>(cls);
    owned.attr("code") = row.name;
    m.attr(row.name) = owned;
    g_classes[static_cast<int>(row.code)] = owned.release().ptr();  // the module keeps one too
  }
}

py::object ErrorClass(StatusCode code) {
  PyObject* cls = g_classes[static_cast<int>(code)];
  if (cls == nullptr) cls = g_classes[static_cast<int>(StatusCode::kInternal)];
  return py::reinterpret_borrow<py::object>(cls);
}

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  PyErr_SetString(ErrorClass(status.code()).ptr(), status.message().c_str());
  throw py::error_already_set();
}

}  // namespace gridfeed::python
