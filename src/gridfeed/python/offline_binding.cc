#include "gridfeed/python/offline_binding.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gridfeed/audit/replay.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/order/registry.h"
#include "gridfeed/python/errors.h"
#include "gridfeed/python/kwargs.h"

namespace gridfeed::python {
namespace py = pybind11;
namespace {

config::JobOptions Resolve(const char* function, const py::kwargs& kwargs, config::Groups groups,
                           bool validate = true) {
  auto o = OptionsFromKwargs(function, kwargs, groups);
  ThrowIfError(o.status());
  if (validate) ThrowIfError(config::Validate(*o));
  return *o;
}

py::object JsonLoads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

// What a pipeline's offline function produced, as nested Python objects: each JSON text
// (spread into the result's keys, or under its file's stem), then each array at its path's
// keys ("train/mid_0/document_index.npy" -> out["train"]["mid"][0]["document_index"]) as a
// NumPy array kept alive by the output's storage, without a copy.
py::dict ToPython(order::OfflineOutput&& output) {
  for (const auto& w : output.warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw py::error_already_set();
  }
  py::dict root;
  for (const auto& t : output.texts) {
    py::object value = JsonLoads(t.json);
    if (t.spread) {
      for (auto item : value.cast<py::dict>()) root[item.first] = item.second;
    } else {
      root[py::str(std::filesystem::path(t.path).stem().string())] = value;
    }
  }
  for (auto& a : output.arrays) {
    std::vector<std::string> keys;
    for (const auto& part : std::filesystem::path(a.path)) keys.push_back(part.string());
    keys.back() = std::filesystem::path(keys.back()).stem().string();
    py::dict node = root;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      const std::string& key = keys[i];
      size_t k = 0;
      if (key.starts_with("mid_") && ParseInt64(key.substr(4))) {  // element K of "mid"
        k = static_cast<size_t>(*ParseInt64(key.substr(4)));
        if (!node.contains("mid")) node["mid"] = py::list();
        py::list mids = node["mid"];
        while (py::len(mids) <= k) mids.append(py::dict());
        node = mids[k];
      } else {
        if (!node.contains(key) || node[py::str(key)].is_none()) node[py::str(key)] = py::dict();
        node = node[py::str(key)];
      }
    }
    auto* holder = new std::shared_ptr<const void>(std::move(a.owner));
    py::capsule owner(holder, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
    std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
    node[py::str(keys.back())] = py::array(py::dtype(a.descr), std::move(shape), a.data, owner);
  }
  return root;
}

// The options' pipeline's `tables` or `samples` output (GIL released while it runs).
py::dict Offline(const config::JobOptions& o, const order::PositionRequest* positions) {
  const order::PipelineKind& kind = order::KindOf(o.data);
  if (!positions && !kind.tables) ThrowIfError(InvalidArgument(kind.no_tables));
  Result<order::OfflineOutput> r = Status();
  {
    py::gil_scoped_release release;
    r = positions ? kind.samples(o, *positions) : kind.tables(o, nullptr);
  }
  ThrowIfError(r.status());
  return ToPython(std::move(r).value());
}

// As `gridfeed tables` writes them: summary.json's fields and each table as an array.
py::dict Tables(const py::kwargs& kwargs) {
  // The command's groups: an OLMo order depends on the DP size and the global batch size.
  const config::JobOptions o =
      Resolve("gridfeed.tables", kwargs,
              {config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  return Offline(o, nullptr);
}

// Positions as int64; InvalidArgument for anything but integers.
std::vector<int64_t> Positions(const py::object& positions) {
  py::module_ np = py::module_::import("numpy");
  py::array a = np.attr("asarray")(positions);
  const std::string kind = py::str(a.dtype().attr("kind"));
  if (a.ndim() > 1 || (a.size() > 0 && kind != "i" && kind != "u")) {
    ThrowIfError(
        InvalidArgument("gridfeed.samples: positions must be integers (a sequence or "
                        "1-D array), got " +
                        py::repr(positions).cast<std::string>().substr(0, 60)));
  }
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> v(a.attr("ravel")());
  std::vector<int64_t> out(v.data(), v.data() + v.size());
  if (kind == "u" && !out.empty()) {  // uint64 above 2^63 wrapped to negatives
    for (int64_t p : out) {
      if (p < 0) ThrowIfError(InvalidArgument("gridfeed.samples: a position beyond 2^63"));
    }
  }
  return out;
}

// As `gridfeed samples` writes them: the pipeline's fields of `positions`, in its dtypes and
// shapes.
py::dict Samples(const py::object& positions, const py::kwargs& kwargs) {
  const config::JobOptions o = Resolve("gridfeed.samples", kwargs,
                                       {config::Group::kData, config::Group::kGrid,
                                        config::Group::kBatch, config::Group::kSplitName});
  order::PositionRequest request;
  request.list = Positions(positions);
  request.who = "gridfeed.samples";
  return Offline(o, &request);
}

// The largest step replay accepts: the option table's bound on --train-iters (replay builds the
// orders up to B).
constexpr int64_t kMaxStep = int64_t{1} << 40;

// A Python integer (not bool) in int64; false otherwise.
bool StepInt(py::handle v, int64_t* out) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) return false;
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {
    PyErr_Clear();
    return false;
  }
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || (n == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = n;
  return true;
}

// "A:B", N, (A, B) or range(A, B) -> [A, B) with 0 <= A < B <= 2^40; InvalidArgument naming
// the argument otherwise.
std::pair<int64_t, int64_t> Steps(const py::object& steps) {
  int64_t a = 0, b = 0;
  bool ok = false;
  if (py::isinstance<py::str>(steps)) {
    const std::string s = steps.cast<std::string>();
    const auto colon = s.find(':');
    if (colon == std::string::npos) {
      const auto n = ParseInt64(s);
      ok = n.has_value() && *n < kMaxStep;
      if (ok) a = *n, b = a + 1;
    } else {
      const auto x = ParseInt64(std::string_view(s).substr(0, colon));
      const auto y = ParseInt64(std::string_view(s).substr(colon + 1));
      ok = x.has_value() && y.has_value();
      if (ok) a = *x, b = *y;
    }
  } else if (py::isinstance<py::int_>(steps)) {
    ok = StepInt(steps, &a) && a < kMaxStep;
    if (ok) b = a + 1;
  } else if (py::isinstance<py::tuple>(steps) && py::len(steps) == 2) {
    const auto t = steps.cast<py::tuple>();
    ok = StepInt(t[0], &a) && StepInt(t[1], &b);
  } else if (py::isinstance(steps, py::module_::import("builtins").attr("range"))) {
    int64_t step = 0;
    ok = StepInt(steps.attr("step"), &step) && step == 1 && StepInt(steps.attr("start"), &a) &&
         StepInt(steps.attr("stop"), &b);
  }
  if (!ok || a < 0 || b <= a || b > kMaxStep) {
    ThrowIfError(
        InvalidArgument("gridfeed.replay: argument 'steps' must be 'A:B', (A, B) or "
                        "range(A, B) with 0 <= A < B <= 2^40, or N < 2^40; got " +
                        py::repr(steps).cast<std::string>().substr(0, 80)));
  }
  return {a, b};
}

// As `gridfeed audit replay --out`: per DP rank its sample_indices [micro-batches, mbs] and
// its records (a structured array with the ledger's columns).
py::list Replay(const py::object& source, const py::object& steps_arg, py::kwargs kwargs) {
  std::string ledger_dir;
  if (kwargs.contains("ledger")) {
    if (!kwargs["ledger"].is_none()) ledger_dir = py::str(kwargs["ledger"]);
    PyDict_DelItemString(kwargs.ptr(), "ledger");
  }
  if (!source.is_none()) {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(source));
    if (std::filesystem::is_directory(path)) {
      ledger_dir = path;
    } else {
      kwargs["config"] = path;
    }
  }
  config::JobOptions o =
      Resolve("gridfeed.replay", kwargs,
              {config::Group::kData, config::Group::kGrid, config::Group::kBatch}, false);
  const auto steps = Steps(steps_arg);
  o.run.train_iters = std::max(o.run.train_iters, steps.second);  // orders built per epoch
  std::unique_ptr<audit::Replay> replay;
  Status st;
  {
    py::gil_scoped_release release;
    auto make = [&]() -> Result<std::unique_ptr<audit::Replay>> {
      if (!ledger_dir.empty()) {
        GRIDFEED_ASSIGN_OR_RETURN(auto ledger, audit::ReadLedger(ledger_dir));
        if (o.grid.data_parallel_size == 0) return audit::Replay::ForLedger(ledger);
        GRIDFEED_ASSIGN_OR_RETURN(o.data, config::FromCanonical(ledger.canonical_config));
      }
      GRIDFEED_RETURN_IF_ERROR(config::Validate(o));
      if (o.grid.data_parallel_size < 1) {
        return InvalidArgument(
            "gridfeed.replay: data_parallel_size must be given (the run's "
            "DP size)");
      }
      return audit::Replay::Create(o);
    };
    auto r = make();
    if (r.ok()) {
      replay = std::move(r).value();
      constexpr int64_t kMaxSteps = 100'000'000;  // as the command: a cyclic order never ends
      const int64_t per_rank = replay->StepsIn(steps.first, steps.second);
      if (per_rank > kMaxSteps / replay->max_dp_size()) {
        st = InvalidArgument("gridfeed.replay: steps cover " + std::to_string(per_rank) +
                             " micro-batches per DP rank; replay at most " +
                             std::to_string(kMaxSteps) + " at once");
      }
    } else {
      st = r.status();
    }
  }
  ThrowIfError(st);
  py::object np = py::module_::import("numpy");
  py::list fields;
  for (const char* f : {"iteration", "micro_batch", "dp_rank", "position", "dataset",
                        "dataset_sample", "first_document", "first_offset"}) {
    fields.append(py::make_tuple(f, "<i8"));
  }
  fields.append(py::make_tuple("token_xxh3", "<u8"));
  py::object record_dtype = np.attr("dtype")(fields);
  py::list out;
  for (int64_t r = 0; r < replay->max_dp_size(); ++r) {
    std::vector<order::StepBatch> batches;
    std::vector<order::SampleRecord> records;
    bool uniform = true;
    {
      py::gil_scoped_release release;
      batches = replay->Batches(steps.first, steps.second, r);
      for (const auto& b : batches) {
        uniform = uniform && b.positions.size() == batches.front().positions.size();
        for (int64_t p : b.positions) {
          records.push_back(replay->Record(p, b.iteration, b.micro_batch, r));
        }
      }
    }
    const auto n = static_cast<py::ssize_t>(records.size());
    const auto rows = static_cast<py::ssize_t>(batches.size());
    py::array_t<int64_t> indices(uniform && rows > 0 ? std::vector<py::ssize_t>{rows, n / rows}
                                 : uniform           ? std::vector<py::ssize_t>{0, 0}
                                                     : std::vector<py::ssize_t>{n});
    py::array recs = np.attr("zeros")(n, record_dtype);
    auto* pi = indices.mutable_data();
    auto* pr = static_cast<int64_t*>(recs.mutable_data());
    for (py::ssize_t k = 0; k < n; ++k) {
      const auto& x = records[k];
      pi[k] = replay->view().SampleIndex(order::Split::kTrain, x.position);
      int64_t* row = pr + 9 * k;
      row[0] = x.iteration, row[1] = x.micro_batch, row[2] = x.dp_rank, row[3] = x.position;
      row[4] = x.dataset, row[5] = x.dataset_sample, row[6] = x.first_document;
      row[7] = x.first_offset;
      std::memcpy(row + 8, &x.token_xxh3, 8);
    }
    py::dict d;
    d["sample_indices"] = indices;
    d["records"] = recs;
    out.append(d);
  }
  return out;
}

}  // namespace

void RegisterOffline(py::module_& m) {
  m.def(
      "tables", [](py::kwargs kwargs) { return Tables(kwargs); },
      R"doc(Every split's index tables, as `gridfeed tables` writes them (no MPI).

tables(config=None, **data_options) -> {"train": {...} | None, "valid": ..., "test": ...}; each
split: type, length, weights, epochs, separate_final_epoch, mid (per source: dataset_path,
document_index, sample_index, shuffle_index, ...), blend (dataset_index int16,
dataset_sample_index) for blends. Arrays are read-only-by-convention views kept alive together.)doc");
  m.def(
      "samples", [](py::object positions, py::kwargs kwargs) { return Samples(positions, kwargs); },
      py::arg("positions"),
      R"doc(Assembled samples of one split, as `gridfeed samples` writes them (no MPI).

samples(positions, config=None, split_name="train", **data_options) -> {items_index, tokens,
labels, loss_mask, position_ids[, attention_mask uint8][, dataset_id int16]} for GPT orders;
SFT adds cu_seqlens, max_seqlen, row_index; FIM as `gridfeed samples --fim-data`; OLMo gives
index, input_ids, its masks and metadata. Positions are integers (a sequence, range or 1-D
array) in the split's top-level order (OLMo: instance indices, negative from the end).)doc");
  m.def(
      "replay",
      [](py::object source, py::object steps, py::kwargs kwargs) {
        return Replay(source, steps, kwargs);
      },
      py::arg("source") = py::none(), py::kw_only(), py::arg("steps") = "0:1",
      R"doc(What every DP rank read in iterations [A, B), as `gridfeed audit replay --out` (no MPI).

replay(ledger_dir_or_config, steps="A:B", **options) -> one dict per DP rank with
sample_indices (int64 [micro-batches, mbs]) and records (structured: the ledger's columns).
A ledger folder replays its own schedule; a YAML config (or config=/data keywords) needs
data_parallel_size and micro_batch_size (global_batch_size optional).)doc");
}

}  // namespace gridfeed::python
