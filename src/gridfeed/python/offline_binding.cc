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
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "gridfeed/order/olmo/olmo_outputs.h"
#include "gridfeed/order/pipeline.h"
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

// A view of `v` kept alive by `owner` (a capsule holding the tables).
// `Array` is a std::vector or a PageArray.
template <typename Array>
py::array View(const Array& v, std::vector<py::ssize_t> shape, py::handle owner) {
  using T = std::remove_cvref_t<decltype(*v.data())>;
  return py::array(py::dtype::of<T>(), std::move(shape), v.data(), owner);
}

// A vector moved into a NumPy array of `shape` that owns it.
template <typename T>
py::array Owned(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* holder = new std::vector<T>(std::move(v));
  py::capsule owner(holder, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array(py::dtype::of<T>(), std::move(shape), holder->data(), owner);
}

py::object JsonLoads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

// OLMo: as `gridfeed tables` writes them, global_indices (uint32) and summary.json's fields.
py::dict OlmoTablesDict(const config::JobOptions& o) {
  Result<order::OlmoTables> t = Status();
  {
    py::gil_scoped_release release;
    t = order::BuildOlmoTables(o);
  }
  ThrowIfError(t.status());
  py::dict out;
  const auto n = static_cast<py::ssize_t>(t->global_indices.size());
  out["summary"] = JsonLoads(t->summary_json);
  out["global_indices"] = Owned(std::move(t->global_indices), {n});
  return out;
}

// OLMo: as `gridfeed samples` writes them, dataset[i]'s configured fields and metadata.
py::dict OlmoSamplesDict(const config::JobOptions& o, const std::vector<int64_t>& indices) {
  Result<order::OlmoItems> r = Status();
  {
    py::gil_scoped_release release;
    r = order::ReadOlmoItems(o, indices);
  }
  ThrowIfError(r.status());
  order::OlmoItems& it = *r;
  const auto n = static_cast<py::ssize_t>(it.index.size());
  const auto L = static_cast<py::ssize_t>(it.seq_length);
  py::dict out;
  out["metadata"] = JsonLoads(it.metadata_json);
  out["index"] = Owned(std::move(it.index), {n});
  out["input_ids"] = Owned(std::move(it.input_ids), {n, L});
  if (it.has_label_mask) out["label_mask"] = Owned(std::move(it.label_mask), {n, L});
  if (it.has_attention_mask) out["attention_mask"] = Owned(std::move(it.attention_mask), {n, L});
  if (it.has_instance_mask) out["instance_mask"] = Owned(std::move(it.instance_mask), {n});
  if (it.has_doc_lens) {
    const auto flat = static_cast<py::ssize_t>(it.doc_lens_flat.size());
    out["doc_lens_flat"] = Owned(std::move(it.doc_lens_flat), {flat});
    out["doc_lens_offsets"] = Owned(std::move(it.doc_lens_offsets), {n + 1});
  }
  return out;
}

py::object Optional(const std::optional<int64_t>& v) {
  return v ? py::object(py::int_(*v)) : py::object(py::none());
}

// As `gridfeed tables` writes them: summary.json's fields and each table as an array.
py::dict Tables(const py::kwargs& kwargs) {
  // The command's groups: an OLMo order depends on the DP size and the global batch size.
  const config::JobOptions o =
      Resolve("gridfeed.tables", kwargs,
              {config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  if (o.data.is_olmo()) return OlmoTablesDict(o);
  Result<order::BuiltDatasets> built = Status();
  {
    py::gil_scoped_release release;
    built = order::BuildMegatronDatasets(o.data);
  }
  ThrowIfError(built.status());
  auto* holder = new order::BuiltDatasets(std::move(built).value());
  py::capsule owner(holder, [](void* p) { delete static_cast<order::BuiltDatasets*>(p); });
  py::dict out;
  for (int i = 0; i < 3; ++i) {
    const char* name = order::kSplitNames[i];
    if (!holder->splits[i]) {
      out[name] = py::none();
      continue;
    }
    const order::SplitDataset& sd = *holder->splits[i];
    py::dict js;
    js["type"] = sd.blended ? "BlendedDataset" : "GPTDataset";
    js["length"] = sd.length;
    py::list mids;
    for (const auto& m : sd.mids) {
      const auto& t = m.tables;
      py::dict md;
      md["dataset_path"] = m.prefix;
      md["sequence_index_range"] = py::make_tuple(m.begin, m.end);
      md["num_samples_requested"] = Optional(m.num_samples_requested);
      md["num_tokens_per_epoch"] = t.num_tokens_per_epoch;
      md["epochs"] = t.num_epochs;
      md["separate_final_epoch"] = t.separate_final_epoch;
      md["length"] = t.num_samples();
      const auto n_docs = static_cast<py::ssize_t>(t.document_index.size());
      md["document_index"] = View(t.document_index, {n_docs}, owner);
      const py::ssize_t rows = t.num_samples() + 1;
      md["sample_index"] = t.sample_index_is_int64 ? View(t.sample_index64, {rows, 2}, owner)
                                                   : View(t.sample_index32, {rows, 2}, owner);
      md["shuffle_index"] =
          t.shuffle_index_is_int64
              ? View(t.shuffle_index64, {static_cast<py::ssize_t>(t.shuffle_index64.size())}, owner)
              : View(t.shuffle_index32, {static_cast<py::ssize_t>(t.shuffle_index32.size())},
                     owner);
      mids.append(md);
    }
    js["mid"] = mids;
    js["epochs"] = sd.mids.size() == 1 ? mids[0]["epochs"] : py::none();
    js["separate_final_epoch"] = sd.mids.size() == 1 ? mids[0]["separate_final_epoch"] : py::none();
    if (sd.blended) {
      const auto n = static_cast<py::ssize_t>(sd.blend.dataset_index.size());
      py::dict blend;
      if (sd.mids.size() <= 32767) {  // Megatron's int16 (as the command writes it)
        py::array_t<int16_t> di(n);
        auto* d = di.mutable_data();
        for (py::ssize_t k = 0; k < n; ++k) d[k] = static_cast<int16_t>(sd.blend.dataset_index[k]);
        blend["dataset_index"] = di;
      } else {
        blend["dataset_index"] = View(sd.blend.dataset_index, {n}, owner);
      }
      blend["dataset_sample_index"] = View(sd.blend.dataset_sample_index, {n}, owner);
      js["blend"] = blend;
      js["weights"] = py::cast(sd.weights);
      js["size"] = Optional(sd.size);
    } else {
      js["weights"] = py::none();
    }
    out[name] = js;
  }
  return out;
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

// As `gridfeed samples`: items_index, tokens, labels, loss_mask, position_ids (+ attention_mask
// uint8, + dataset_id int16 for blends), in the command's dtypes and shapes.
py::dict Samples(const py::object& positions, const py::kwargs& kwargs) {
  const config::JobOptions o = Resolve("gridfeed.samples", kwargs,
                                       {config::Group::kData, config::Group::kGrid,
                                        config::Group::kBatch, config::Group::kSplitName});
  const std::vector<int64_t> pos = Positions(positions);
  if (o.data.is_olmo()) return OlmoSamplesDict(o, pos);  // instance indices, negative allowed
  const std::string& name = o.feed.split_name;
  order::Split split = order::Split::kTrain;
  for (int i = 0; i < 3; ++i) {
    if (name == order::kSplitNames[i]) split = static_cast<order::Split>(i);
  }
  std::unique_ptr<order::BuiltOrder> built;
  Status st;
  {
    py::gil_scoped_release release;
    auto pipeline = order::Pipeline::For(o);
    auto b = pipeline.ok() ? (*pipeline)->Build()
                           : Result<std::unique_ptr<order::BuiltOrder>>(pipeline.status());
    if (b.ok()) {
      built = std::move(b).value();
    } else {
      st = b.status();
    }
  }
  ThrowIfError(st);
  const order::OrderView& view = built->view();
  const int64_t length = view.length(split);
  if (length == 0) ThrowIfError(FailedPrecondition("split " + name + " is empty"));
  for (int64_t p : pos) {  // checked before anything is allocated
    if (p < 0)
      ThrowIfError(InvalidArgument("gridfeed.samples: negative position " + std::to_string(p)));
    if (p >= length) {
      ThrowIfError(OutOfRange("gridfeed.samples: position " + std::to_string(p) +
                              " is beyond the split's " + std::to_string(length) + " samples"));
    }
  }
  const auto n = static_cast<py::ssize_t>(pos.size());
  // One array shape: every position at one length (a mixture stage may set its own).
  auto lengths = order::SeqLengthsOf(o, split);
  ThrowIfError(lengths.status());
  auto common = lengths->Common(pos);
  ThrowIfError(common.status());
  const auto L = static_cast<py::ssize_t>(*common);
  const bool mask = o.data.create_attention_mask, blend = view.is_blend(split);
  py::array_t<int64_t> items(n), tokens({n, L}), labels({n, L}), position_ids({n, L});
  py::array_t<float> loss_mask({n, L});
  py::array_t<uint8_t> attention_mask(mask ? std::vector<py::ssize_t>{n, 1, L, L}
                                           : std::vector<py::ssize_t>{0});
  py::array_t<int16_t> dataset_id(blend ? n : 0);
  {
    int64_t* pi = items.mutable_data();
    int64_t *pt = tokens.mutable_data(), *pl = labels.mutable_data(),
            *pp = position_ids.mutable_data();
    float* pm = loss_mask.mutable_data();
    uint8_t* pa = attention_mask.mutable_data();
    int16_t* pd = dataset_id.mutable_data();
    py::gil_scoped_release release;
    order::Sample sample;
    for (py::ssize_t k = 0; k < n; ++k) {
      const order::SampleRecord r = view.Read(split, pos[k], &sample, /*hash_tokens=*/false);
      pi[k] = pos[k];
      std::copy(sample.tokens.begin(), sample.tokens.end(), pt + k * L);
      std::copy(sample.labels.begin(), sample.labels.end(), pl + k * L);
      std::copy(sample.position_ids.begin(), sample.position_ids.end(), pp + k * L);
      std::copy(sample.loss_mask.begin(), sample.loss_mask.end(), pm + k * L);
      if (mask)
        std::copy(sample.attention_mask.begin(), sample.attention_mask.end(), pa + k * L * L);
      if (blend) pd[k] = static_cast<int16_t>(r.dataset);
    }
  }
  py::dict out;
  out["items_index"] = items;
  out["tokens"] = tokens;
  out["labels"] = labels;
  out["loss_mask"] = loss_mask;
  out["position_ids"] = position_ids;
  if (mask) out["attention_mask"] = attention_mask;
  if (blend) out["dataset_id"] = dataset_id;
  return out;
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
labels, loss_mask, position_ids[, attention_mask uint8][, dataset_id int16]}; positions are
integers (a sequence, range or 1-D array) in the split's top-level order.)doc");
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
