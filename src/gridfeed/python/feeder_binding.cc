#include "gridfeed/python/feeder_binding.h"

#include <mpi.h>
// mpi4py's C API (PyMPIComm_New, PyMPIComm_Get); its function table is filled on first use.
#include <mpi4py/mpi4py.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/parallel/agree.h"
#include "gridfeed/python/errors.h"
#include "gridfeed/python/kwargs.h"

namespace gridfeed::python {
namespace py = pybind11;
namespace {

// Imports mpi4py.MPI (which initialises MPI) and its C API, once.
void EnsureMpi4py() {
  static bool imported = false;
  if (imported) return;
  if (import_mpi4py() < 0) throw py::error_already_set();
  imported = true;
}

py::object WrapComm(MPI_Comm comm) {
  EnsureMpi4py();
  PyObject* obj = PyMPIComm_New(comm);
  if (obj == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

// One micro-batch as Python sees it: a read-only mapping of Megatron's field names to NumPy
// views over the buffers this object owns.
class PyMicroBatch {
 public:
  explicit PyMicroBatch(feed::MicroBatch mb) : mb_(std::move(mb)) {}

  // The keys this rank's stage received, in the order of Megatron's get_batch.
  std::vector<const char*> Keys() const {
    std::vector<const char*> keys;
    if (mb_.has_inputs) keys.push_back("tokens");
    if (mb_.has_targets) keys.insert(keys.end(), {"labels", "loss_mask"});
    if (mb_.has_inputs && !mb_.attention_mask.empty()) keys.push_back("attention_mask");
    if (mb_.has_inputs) keys.push_back("position_ids");
    return keys;
  }

  // A view of field `key` whose base is `self` (this object); nullopt when absent.
  std::optional<py::array> Field(py::handle self, const std::string& key) const {
    const auto b = static_cast<py::ssize_t>(mb_.micro_batch_size);
    const auto s = static_cast<py::ssize_t>(mb_.local_seq_length);
    if (mb_.has_inputs) {
      if (key == "tokens") return View(self, mb_.tokens, {b, s});
      if (key == "position_ids") return View(self, mb_.position_ids, {b, s});
      if (key == "attention_mask" && !mb_.attention_mask.empty()) {
        // Megatron's mask is bool [b, 1, s, s] (True = masked out); the bytes are 0/1.
        return py::array(py::dtype::of<bool>(),
                         {b, py::ssize_t{1}, s, static_cast<py::ssize_t>(mb_.seq_length)},
                         mb_.attention_mask.data(), self);
      }
    }
    if (mb_.has_targets) {
      if (key == "labels") return View(self, mb_.labels, {b, s});
      if (key == "loss_mask") return View(self, mb_.loss_mask, {b, s});
    }
    return std::nullopt;
  }

  py::array SampleIndices(py::handle self) const {
    return View(self, mb_.sample_indices, {static_cast<py::ssize_t>(mb_.sample_indices.size())});
  }
  py::array SamplePositions(py::handle self) const {
    return View(self, mb_.sample_positions,
                {static_cast<py::ssize_t>(mb_.sample_positions.size())});
  }
  py::array SourceIds(py::handle self) const {
    return View(self, mb_.source_ids, {static_cast<py::ssize_t>(mb_.source_ids.size())});
  }
  const feed::MicroBatch& mb() const { return mb_; }

 private:
  template <typename T>
  static py::array View(py::handle self, const std::vector<T>& v, std::vector<py::ssize_t> shape) {
    if (v.empty()) return py::array_t<T>(shape);  // nothing to view (middle stage)
    return py::array(py::dtype::of<T>(), std::move(shape), v.data(), self);
  }
  feed::MicroBatch mb_;
};

class PyFeeder {
 public:
  explicit PyFeeder(py::kwargs kwargs) {
    py::object comm = py::none();
    if (kwargs.contains("comm")) {
      comm = kwargs["comm"];
      PyDict_DelItemString(kwargs.ptr(), "comm");
    }
    EnsureMpi4py();
    if (comm.is_none()) comm = py::module_::import("mpi4py.MPI").attr("COMM_WORLD");
    if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type)) {
      ThrowIfError(
          InvalidArgument("gridfeed.Feeder: keyword 'comm' must be an mpi4py "
                          "communicator, got " +
                          py::repr(comm).cast<std::string>()));
    }
    MPI_Comm c = *PyMPIComm_Get(comm.ptr());
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (c == MPI_COMM_NULL || finalized) {
      ThrowIfError(FailedPrecondition("gridfeed.Feeder: MPI is finalized or 'comm' is null"));
    }
    // Keyword errors are local; they are agreed before Open so no rank waits alone.
    auto local = OptionsFromKwargs("gridfeed.Feeder", kwargs, config::Groups::All());
    Status checked = local.ok() ? config::Validate(*local) : local.status();
    Status agreed;
    {
      py::gil_scoped_release release;
      int rank = 0;
      MPI_Comm_rank(c, &rank);
      MPI_Comm dup;
      MPI_Comm_dup(c, &dup);
      agreed = parallel::AgreeOnStatus(dup, checked, rank);
      MPI_Comm_free(&dup);
    }
    ThrowIfError(agreed);
    const config::JobOptions options = *local;
    Result<std::unique_ptr<feed::Feeder>> opened = Status();
    {
      py::gil_scoped_release release;
      opened = feed::Feeder::Open(options, c);
    }
    ThrowIfError(opened.status());
    feeder_ = std::move(opened).value();
    Status ledger_opened;
    {
      py::gil_scoped_release release;
      ledger_opened = OpenLedger();
      if (!ledger_opened.ok()) {
        ledger_.reset();
        feeder_.reset();  // the same error on every rank: a collective destruction
      }
    }
    ThrowIfError(ledger_opened);
  }

  ~PyFeeder() {
    // Not closed: leave the MPI resources to MPI_Finalize (see feeder_binding.h).
    Abandon();
  }

  py::object Next() {
    feed::Feeder& f = Open();
    Status logged;
    auto r = [&] {
      py::gil_scoped_release release;
      auto mb = f.Next();
      if (mb.ok()) {
        if (mb->device_payload != nullptr) {
          // Device path: the arrays are a host copy of what reached this rank's GPU.
          auto host = f.DevicePayloadToHost(*mb);
          if (host.ok()) {
            f.payload_layout().Unpack(*host, &*mb);
          } else {
            logged = host.status();
          }
        }
        if (ledger_) {
          for (const auto& rec : mb->records) {
            if (logged.ok()) logged = ledger_->Append(rec);
          }
        }
      }
      return mb;
    }();
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kOutOfRange) {
        PyErr_SetString(PyExc_StopIteration, r.status().message().c_str());
        throw py::error_already_set();
      }
      ThrowIfError(r.status());
    }
    ThrowIfError(logged);
    return py::cast(PyMicroBatch(std::move(r).value()));
  }

  void SaveCheckpoint(const std::string& path, int64_t iteration) {
    feed::Feeder& f = Open();
    Status st;
    {
      py::gil_scoped_release release;
      st = FlushLedger();
      if (st.ok()) st = f.SaveCheckpoint(path, iteration);
    }
    ThrowIfError(st);
  }

  void Close() {
    if (!feeder_) return;
    Status st;
    {
      py::gil_scoped_release release;
      st = FlushLedger();
      ledger_.reset();
      feeder_.reset();  // collective
    }
    ThrowIfError(st);
  }

  // Local: stops using the feeder without its collective destruction.
  void Abandon() {
    ledger_.reset();
    if (feeder_) static_cast<void>(feeder_.release());  // freed by the end of the job
  }

  // Seconds that `n` calls of the C++ Next() take (the benchmark's floor). Collective as Next.
  double TimeCxxNext(int64_t n) {
    feed::Feeder& f = Open();
    Status st;
    double seconds = 0;
    {
      py::gil_scoped_release release;
      Stopwatch watch;
      for (int64_t i = 0; i < n && st.ok(); ++i) {
        auto mb = f.Next();
        if (!mb.ok()) st = mb.status();
      }
      seconds = watch.Seconds();
    }
    ThrowIfError(st);
    return seconds;
  }

  feed::Feeder& Open() const {
    if (!feeder_) ThrowIfError(FailedPrecondition("the gridfeed.Feeder is closed"));
    return *feeder_;
  }
  bool closed() const { return !feeder_; }

 private:
  // Collective on the world: the first-stage reader of CP rank 0 of each DP rank opens its
  // ledger file (as gridfeed run does).
  Status OpenLedger() {
    const auto& o = feeder_->options();
    if (o.run.ledger.empty()) return Status::Ok();
    const auto& g = feeder_->grid();
    // As gridfeed run and the toy trainer: a fresh run into a non-empty ledger is refused
    // (overwrite_ledger=True replaces it), the folder is locked, failures agreed.
    auto w = audit::OpenJobLedger(
        g.is_reader() && g.first_stage() && g.cp_rank() == 0, o.run.ledger, g.dp_rank(),
        feeder_->fingerprint(), feeder_->canonical_config(), feeder_->schedule(),
        feeder_->schedule_history(), {!o.resume.resume_from.empty(), o.run.overwrite_ledger},
        [&g](const Status& local) {
          return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
        });
    if (!w.ok()) return w.status();
    ledger_ = std::move(w).value();
    return Status::Ok();
  }

  // Collective on the world: the ledger's lines are durable on every rank that writes one.
  Status FlushLedger() {
    const auto& g = feeder_->grid();
    if (feeder_->options().run.ledger.empty()) return Status::Ok();
    Status flushed = ledger_ ? ledger_->Flush() : Status::Ok();
    return parallel::AgreeOnStatus(g.world(), flushed, g.world_rank());
  }

  std::unique_ptr<feed::Feeder> feeder_;
  std::unique_ptr<audit::LedgerWriter> ledger_;
};

}  // namespace

void RegisterFeeder(py::module_& m) {
  py::class_<PyMicroBatch>(m, "MicroBatch", R"doc(
What one rank received for one micro-batch: a read-only mapping of Megatron's field names
(tokens, labels, loss_mask, attention_mask, position_ids; only those this rank's pipeline stage
gets) to NumPy views [micro_batch_size, local_seq_length] (attention_mask bool
[micro_batch_size, 1, local_seq_length, seq_length]) over buffers this object owns: no copy;
each view's base is the MicroBatch, which lives as long as any view or tensor made from one.
dict(mb) gives a plain dict of the same views. seq_length is this micro-batch's: a mixture stage
with its own seq_length changes it between global batches.)doc")
      .def("__getitem__",
           [](py::object self, const std::string& key) {
             auto a = self.cast<const PyMicroBatch&>().Field(self, key);
             if (!a) throw py::key_error(key);
             return *a;
           })
      .def(
          "get",
          [](py::object self, const std::string& key, py::object dflt) -> py::object {
            auto a = self.cast<const PyMicroBatch&>().Field(self, key);
            return a ? py::object(*a) : dflt;
          },
          py::arg("key"), py::arg("default") = py::none())
      .def("__contains__",
           [](const PyMicroBatch& b, const std::string& key) {
             for (const char* k : b.Keys()) {
               if (key == k) return true;
             }
             return false;
           })
      .def("__len__", [](const PyMicroBatch& b) { return b.Keys().size(); })
      .def("keys", [](const PyMicroBatch& b) { return py::cast(b.Keys()); })
      .def("__iter__", [](const PyMicroBatch& b) { return py::iter(py::cast(b.Keys())); })
      .def("values",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(*b.Field(self, k));
             return out;
           })
      .def("items",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(py::make_tuple(k, *b.Field(self, k)));
             return out;
           })
      .def_property_readonly(
          "sample_indices",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SampleIndices(self); },
          "int64 [micro_batch_size]: the order's sample index of each sample (Megatron's "
          "top-level dataset index, OLMo's instance index; empty on middle pipeline stages)")
      .def_property_readonly(
          "sample_positions",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SamplePositions(self); },
          "int64 [micro_batch_size]: each sample's global position in the split's read order "
          "(what resumes and ledgers count; equal to sample_indices for Megatron's order)")
      .def_property_readonly(
          "source_ids",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SourceIds(self); },
          "int64 [micro_batch_size]: each sample's blend source (0 without a blend)")
      .def_property_readonly("micro_batch_size",
                             [](const PyMicroBatch& b) { return b.mb().micro_batch_size; })
      .def_property_readonly(
          "seq_length", [](const PyMicroBatch& b) { return b.mb().seq_length; },
          "tokens per sample of this micro-batch (a mixture stage may set its own)")
      .def_property_readonly("local_seq_length",
                             [](const PyMicroBatch& b) { return b.mb().local_seq_length; })
      .def_property_readonly("has_inputs", [](const PyMicroBatch& b) { return b.mb().has_inputs; })
      .def_property_readonly("has_targets",
                             [](const PyMicroBatch& b) { return b.mb().has_targets; })
      .def("__repr__", [](const PyMicroBatch& b) {
        std::string keys;
        for (const char* k : b.Keys()) keys += std::string(keys.empty() ? "" : ", ") + k;
        return "<gridfeed.MicroBatch [" + std::to_string(b.mb().micro_batch_size) + " x " +
               std::to_string(b.mb().local_seq_length) + "] " + keys + ">";
      });
  py::module_::import("collections.abc").attr("Mapping").attr("register")(m.attr("MicroBatch"));

  auto grid = [](const PyFeeder& f) -> const parallel::Grid& { return f.Open().grid(); };
  py::class_<PyFeeder>(m, "Feeder", R"doc(
gridfeed's feeder for one rank of an MPI job (collective constructor):

    Feeder(comm=MPI.COMM_WORLD, config="job.yaml", **options)

Keywords are the option table's names with underscores (gridfeed.option_table()); config= is a
YAML file of the same options, which keywords override. Unknown keywords raise
gridfeed.InvalidArgument on every rank. next() returns the next MicroBatch (collective on the
TP group) and raises StopIteration on every rank at the same step when the split runs out; the
Feeder is also an iterator. close() is collective: call it on every rank at the same point, or
use `with Feeder(...) as feeder:`. A Feeder dropped without close() (or left by an exception)
is not destroyed collectively; its MPI resources stay until MPI_Finalize.)doc")
      .def(py::init([](py::kwargs kwargs) { return std::make_unique<PyFeeder>(kwargs); }))
      .def("next", &PyFeeder::Next,
           "The next MicroBatch (collective on the TP group; releases the GIL)")
      .def("__next__", &PyFeeder::Next)
      .def("__iter__", [](py::object self) { return self; })
      .def("save_checkpoint", &PyFeeder::SaveCheckpoint, py::arg("path"), py::kw_only(),
           py::arg("iteration"),
           "Collective: world rank 0 writes the HDF5 cursor atomically (the ledger is flushed "
           "first); resume with resume=path")
      .def("close", &PyFeeder::Close, "Collective: destroys the feeder on every rank")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyFeeder& f, py::object type, py::object, py::object) {
             if (type.is_none()) {
               f.Close();
             } else {
               f.Abandon();  // this rank may be alone here: no collective
             }
             return false;
           })
      .def("_time_cxx_next", &PyFeeder::TimeCxxNext, py::arg("n"),
           "Benchmarks only: seconds for n calls of the C++ Next()")
      .def_property_readonly("closed", &PyFeeder::closed)
      .def_property_readonly("world_rank", [=](const PyFeeder& f) { return grid(f).world_rank(); })
      .def_property_readonly("world_size", [=](const PyFeeder& f) { return grid(f).world_size(); })
      .def_property_readonly("dp_rank", [=](const PyFeeder& f) { return grid(f).dp_rank(); })
      .def_property_readonly("tp_rank", [=](const PyFeeder& f) { return grid(f).tp_rank(); })
      .def_property_readonly("pp_rank", [=](const PyFeeder& f) { return grid(f).pp_rank(); })
      .def_property_readonly("cp_rank", [=](const PyFeeder& f) { return grid(f).cp_rank(); })
      .def_property_readonly("dp_size", [=](const PyFeeder& f) { return grid(f).dp_size(); })
      .def_property_readonly("tp_size", [=](const PyFeeder& f) { return grid(f).tp_size(); })
      .def_property_readonly("pp_size", [=](const PyFeeder& f) { return grid(f).pp_size(); })
      .def_property_readonly("cp_size", [=](const PyFeeder& f) { return grid(f).cp_size(); })
      .def_property_readonly("sizes",
                             [=](const PyFeeder& f) {
                               const auto& g = grid(f);
                               py::dict d;
                               d["dp"] = g.dp_size();
                               d["tp"] = g.tp_size();
                               d["pp"] = g.pp_size();
                               d["cp"] = g.cp_size();
                               return d;
                             })
      .def_property_readonly("is_first_stage",
                             [=](const PyFeeder& f) { return grid(f).first_stage(); })
      .def_property_readonly("is_last_stage",
                             [=](const PyFeeder& f) { return grid(f).last_stage(); })
      .def_property_readonly("is_reader", [=](const PyFeeder& f) { return grid(f).is_reader(); })
      .def_property_readonly("world_comm",
                             [=](const PyFeeder& f) { return WrapComm(grid(f).world()); })
      .def_property_readonly("dp_comm",
                             [=](const PyFeeder& f) { return WrapComm(grid(f).dp_comm()); })
      .def_property_readonly("tp_comm",
                             [=](const PyFeeder& f) { return WrapComm(grid(f).tp_comm()); })
      .def_property_readonly("pp_comm",
                             [=](const PyFeeder& f) { return WrapComm(grid(f).pp_comm()); })
      .def_property_readonly("cp_comm",
                             [=](const PyFeeder& f) { return WrapComm(grid(f).cp_comm()); })
      .def_property_readonly("consumed_samples",
                             [](const PyFeeder& f) { return f.Open().consumed_samples(); })
      .def_property_readonly("resumed_iteration",
                             [](const PyFeeder& f) { return f.Open().resumed_iteration(); })
      .def_property_readonly(
          "num_microbatches_per_global_batch",
          [](const PyFeeder& f) { return f.Open().num_microbatches_per_global_batch(); })
      .def_property_readonly("split_length",
                             [](const PyFeeder& f) { return f.Open().split_length(); })
      .def_property_readonly("fingerprint",
                             [](const PyFeeder& f) { return f.Open().fingerprint(); })
      .def_property_readonly("canonical_config",
                             [](const PyFeeder& f) { return f.Open().canonical_config(); })
      .def_property_readonly(
          "options",
          [](const PyFeeder& f) { return OptionsDict(f.Open().options(), config::Groups::All()); })
      .def_property_readonly("startup_seconds", [](const PyFeeder& f) {
        const auto& s = f.Open().startup();
        py::dict d;
        d["build"] = s.build_seconds;
        d["broadcast"] = s.broadcast_seconds;
        d["open"] = s.open_seconds;
        return d;
      });
}

}  // namespace gridfeed::python
