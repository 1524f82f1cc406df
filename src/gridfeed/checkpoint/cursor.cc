#include "gridfeed/checkpoint/cursor.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::checkpoint {
namespace {

// Closes an HDF5 handle on scope exit; Close() reports the result where it matters.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  bool Close() { return close_(std::exchange(id_, -1)) >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void QuietHdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become Status values, not stderr
    return true;
  }();
  (void)done;
}

Status WriteInts(hid_t group, const char* name, const std::vector<int64_t>& values) {
  const std::string what = std::string("dataset /gridfeed/") + name;
  const hsize_t n = values.size();
  const hsize_t chunk = std::max<hsize_t>(n, 1);
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!space.ok() || !plist.ok() || H5Pset_chunk(plist.get(), 1, &chunk) < 0 ||
      H5Pset_fletcher32(plist.get()) < 0) {
    return IoError("cannot set up " + what);
  }
  Handle ds(
      H5Dcreate2(group, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
      H5Dclose);
  if (!ds.ok()) return IoError("cannot create " + what);
  if (n > 0 &&
      H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    return IoError("cannot write " + what);
  }
  if (!ds.Close()) return IoError("cannot close " + what);
  return Status::Ok();
}

// Bounds on what a reader allocates, whatever the file says.
constexpr hsize_t kMaxSources = hsize_t{1} << 20;
constexpr size_t kMaxStringBytes = size_t{64} << 20;

// What ReadInts accepts: `min_n` <= extent <= `max_n`, every value >= `min_value`.
struct IntsSpec {
  const char* name;
  hsize_t min_n, max_n;
  int64_t min_value;
};

bool HasFletcher32(hid_t ds) {
  Handle plist(H5Dget_create_plist(ds), H5Pclose);
  if (!plist.ok()) return false;
  const int n = H5Pget_nfilters(plist.get());
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0;
    size_t nvalues = 0;
    unsigned filter_config = 0;
    if (H5Pget_filter2(plist.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, 0, nullptr,
                       &filter_config) == H5Z_FILTER_FLETCHER32) {
      return true;
    }
  }
  return false;
}

// Reads /gridfeed/<name>: a rank-1 dataset of 64-bit signed integers with the Fletcher32 filter.
// Shape, type and filter are checked before anything is allocated.
Result<std::vector<int64_t>> ReadInts(hid_t group, const IntsSpec& spec, const std::string& path) {
  const std::string where =
      "checkpoint '" + path + "': dataset /gridfeed/" + std::string(spec.name) + " ";
  Handle ds(H5Dopen2(group, spec.name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return DataLoss(where + "is missing or unreadable");
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) != 8 ||
      H5Tget_sign(type.get()) != H5T_SGN_2) {
    return DataLoss(where + "is not of type int64");
  }
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE ||
      H5Sget_simple_extent_ndims(space.get()) != 1) {
    return DataLoss(where + "is not one-dimensional");
  }
  hsize_t n = 0;
  if (H5Sget_simple_extent_dims(space.get(), &n, nullptr) != 1) {
    return DataLoss(where + "has an unreadable shape");
  }
  if (n < spec.min_n || n > spec.max_n) {
    return DataLoss(where + "has " + std::to_string(n) + " elements, expected " +
                    (spec.min_n == spec.max_n
                         ? std::to_string(spec.min_n)
                         : std::to_string(spec.min_n) + " to " + std::to_string(spec.max_n)));
  }
  if (!HasFletcher32(ds.get())) return DataLoss(where + "lacks the Fletcher32 checksum filter");
  // Unwritten chunks would read as zeros without a checksum: every element must be stored.
  if (H5Dget_storage_size(ds.get()) < n * 8) {
    return DataLoss(where + "stores fewer bytes than its " + std::to_string(n) + " elements need");
  }
  std::vector<int64_t> out(n);
  if (n > 0 && H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
    return DataLoss(where + "fails its Fletcher32 checksum or cannot be read (corrupt file)");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < spec.min_value) {
      return DataLoss(where + "holds " + std::to_string(out[i]) + " at index " + std::to_string(i) +
                      ", below the minimum " + std::to_string(spec.min_value));
    }
  }
  return out;
}

Status WriteString(hid_t group, const char* name, const std::string& value) {
  const std::string what = std::string("attribute /gridfeed/") + name;
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)) < 0) {
    return IoError("cannot set up " + what);
  }
  Handle attr(H5Acreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), value.empty() ? "" : value.data()) < 0 ||
      !attr.Close()) {
    return IoError("cannot write " + what);
  }
  return Status::Ok();
}

// Reads the scalar, fixed-length string attribute /gridfeed/<name>.
Result<std::string> ReadString(hid_t group, const char* name, const std::string& path) {
  const std::string where = "checkpoint '" + path + "': attribute /gridfeed/" + name + " ";
  Handle attr(H5Aopen(group, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return DataLoss(where + "is missing or unreadable");
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0) {
    return DataLoss(where + "is not a fixed-length string");
  }
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) {
    return DataLoss(where + "is not a scalar");
  }
  const size_t size = H5Tget_size(type.get());
  if (size == 0 || size > kMaxStringBytes) {
    return DataLoss(where + "has an implausible size of " + std::to_string(size) + " bytes");
  }
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!mem.ok() || H5Tset_size(mem.get(), size) < 0) return Internal("cannot set up " + where);
  std::string out(size, '\0');
  if (H5Aread(attr.get(), mem.get(), out.data()) < 0) return DataLoss(where + "cannot be read");
  out.resize(std::strlen(out.c_str()));
  return out;
}

// What no run writes, in words naming the dataset or attribute (empty: plausible). The writer
// refuses what the reader refuses, so a save never replaces a good checkpoint with a bad one.
std::string Implausible(const Cursor& c) {
  constexpr int64_t kMaxIterations = int64_t{1} << 40;  // the most --train-iters allows
  constexpr int64_t kMaxSamples = int64_t{1} << 62;     // consumed counts never get near
  constexpr int64_t kMaxBatch = int64_t{1} << 40;       // --micro/--global-batch-size bounds
  constexpr int64_t kMaxRanks = int64_t{1} << 24;
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(c.iteration, 0, kMaxIterations)) {
    return "dataset /gridfeed/iteration holds " + std::to_string(c.iteration) +
           ", outside what a run reaches ([0, 2^40], the range of --train-iters)";
  }
  const std::pair<const char*, int64_t> counts[] = {
      {"consumed_train_samples", c.consumed_train_samples},
      {"consumed_valid_samples", c.consumed_valid_samples},
      {"consumed_test_samples", c.consumed_test_samples}};
  for (const auto& [name, v] : counts) {
    if (!in(v, 0, kMaxSamples)) {
      return std::string("dataset /gridfeed/") + name + " holds " + std::to_string(v) +
             ", outside [0, 2^62]";
    }
  }
  for (int64_t v : {c.dp, c.tp, c.pp, c.cp}) {
    if (!in(v, 1, kMaxRanks)) {
      return "dataset /gridfeed/grid_dp_tp_pp_cp holds " + std::to_string(v) +
             ", outside [1, 2^24]";
    }
  }
  for (int64_t v : {c.micro_batch_size, c.global_batch_size}) {
    if (!in(v, 1, kMaxBatch)) {
      return "dataset /gridfeed/micro_global_batch_size holds " + std::to_string(v) +
             ", outside [1, 2^40]";
    }
  }
  for (size_t i = 0; i < c.source_samples.size(); ++i) {
    if (!in(c.source_samples[i], 0, kMaxSamples) ||
        (i < c.source_tokens.size() && !in(c.source_tokens[i], 0, kMaxSamples))) {
      return "dataset /gridfeed/source_consumed_samples or source_consumed_tokens holds a value "
             "outside [0, 2^62] at index " +
             std::to_string(i);
    }
  }
  if (c.schedule_history.empty()) return "";
  // A list of {"position", "schedule"} (the schedule in force from each position on), positions
  // in order and not past the cursor, each schedule one that parses.
  const std::string where = "attribute /gridfeed/schedule_history ";
  const auto j = nlohmann::json::parse(c.schedule_history, nullptr, false);
  if (!j.is_array() || j.empty()) return where + "is not a non-empty JSON list";
  int64_t last = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string entry = where + "entry " + std::to_string(i) + " ";
    if (!e.is_object() || !e.contains("position") || !e["position"].is_number_integer() ||
        !e.contains("schedule") || !e["schedule"].is_string()) {
      return entry + "is not {\"position\": integer, \"schedule\": text}";
    }
    for (const auto& [key, value] : e.items()) {
      if (key != "position" && key != "schedule" && key != "fingerprint") {
        return entry + "has an unknown key '" + key + "'";
      }
    }
    const int64_t position = e["position"].get<int64_t>();
    if (position < last || position > c.consumed_train_samples) {
      return entry + "starts at position " + std::to_string(position) +
             ", not between the previous entry's (" + std::to_string(last) + ") and the cursor (" +
             std::to_string(c.consumed_train_samples) + ")";
    }
    last = position;
    auto schedule = config::ParseMixtureSchedule(e["schedule"].get<std::string>());
    if (!schedule.ok()) return entry + "holds no mixture schedule: " + schedule.status().message();
  }
  return "";
}

// Builds the file in memory (HDF5 core driver, no backing store) so HDF5 never writes to disk:
// every byte reaches the disk through io::AtomicFile, whose writes, fsync, close and rename are
// checked, and a failed HDF5 call leaves no half-written file or open file id behind.
Result<std::vector<unsigned char>> BuildImage(const std::string& name, const Cursor& c) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 64 << 10, /*backing_store=*/0) < 0) {
    return Internal("cannot set up the HDF5 in-memory driver");
  }
  Handle file(H5Fcreate(name.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.ok()) return IoError("cannot create the in-memory HDF5 file");
  Handle group(H5Gcreate2(file.get(), "/gridfeed", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Gclose);
  if (!group.ok()) return IoError("cannot create group /gridfeed");
  const hid_t g = group.get();
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "format_version", {kFormatVersion}));
  GRIDFEED_RETURN_IF_ERROR(WriteString(g, "fingerprint", c.fingerprint));
  GRIDFEED_RETURN_IF_ERROR(WriteString(g, "canonical_config", c.canonical_config));
  if (!c.order_position.empty()) {
    GRIDFEED_RETURN_IF_ERROR(WriteString(g, "order_position", c.order_position));
  }
  if (!c.token_store_facts.empty()) {
    GRIDFEED_RETURN_IF_ERROR(WriteString(g, "token_store_facts", c.token_store_facts));
  }
  if (!c.schedule_history.empty()) {
    GRIDFEED_RETURN_IF_ERROR(WriteString(g, "schedule_history", c.schedule_history));
  }
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "iteration", {c.iteration}));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "consumed_train_samples", {c.consumed_train_samples}));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "consumed_valid_samples", {c.consumed_valid_samples}));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "consumed_test_samples", {c.consumed_test_samples}));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "source_consumed_samples", c.source_samples));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "source_consumed_tokens", c.source_tokens));
  GRIDFEED_RETURN_IF_ERROR(WriteInts(g, "grid_dp_tp_pp_cp", {c.dp, c.tp, c.pp, c.cp}));
  GRIDFEED_RETURN_IF_ERROR(
      WriteInts(g, "micro_global_batch_size", {c.micro_batch_size, c.global_batch_size}));
  if (!group.Close()) return IoError("cannot close group /gridfeed");
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) return IoError("cannot flush the HDF5 file");
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) return IoError("cannot get the HDF5 file image");
  std::vector<unsigned char> image(static_cast<size_t>(size));
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    return IoError("cannot copy the HDF5 file image");
  }
  if (!file.Close()) return IoError("cannot close the HDF5 file");
  return image;
}

}  // namespace

Status WriteCursor(const std::string& path, const Cursor& c) {
  QuietHdf5();
  if (path.empty() || path.find('\0') != std::string::npos) {
    return InvalidArgument("a checkpoint path must be non-empty and hold no NUL character");
  }
  if (const std::string why = Implausible(c); !why.empty()) {
    return InvalidArgument("checkpoint '" + path + "' not written: " + why);
  }
  GRIDFEED_ASSIGN_OR_RETURN(io::AtomicFile out, io::AtomicFile::Create(path));
  // The in-memory file needs a name that no file has (it is never created).
  auto image = BuildImage(out.temp_path() + ".image", c);
  if (!image.ok()) return image.status().WithContext("checkpoint '" + path + "'");
  GRIDFEED_RETURN_IF_ERROR(out.Write(image->data(), image->size()));
  GRIDFEED_RETURN_IF_ERROR(out.Commit(/*publish=*/false));
  // Tests only (GRIDFEED_TESTING_CRASH_BEFORE_RENAME=<iteration>): die between the complete
  // temporary file and the rename, the window in which a crash must leave the previous checkpoint
  // intact.
  if (const char* v = std::getenv("GRIDFEED_TESTING_CRASH_BEFORE_RENAME");
      v && std::atoll(v) == c.iteration) {
    std::raise(SIGKILL);
  }
  return out.Publish();
}

Result<Cursor> ReadCursor(const std::string& path) {
  QuietHdf5();
  if (path.find('\0') != std::string::npos) {
    return InvalidArgument("a checkpoint path holds a NUL character");
  }
  if (!std::filesystem::exists(path)) return NotFound("no checkpoint file '" + path + "'");
  {  // HDF5 opens by name: refuse a FIFO (it would block) or device first.
    GRIDFEED_ASSIGN_OR_RETURN(const int fd, io::OpenRegularFile(path, "checkpoint"));
    ::close(fd);
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return DataLoss("checkpoint '" + path + "' is not a readable HDF5 file (corrupt or truncated)");
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) {
    return DataLoss("checkpoint '" + path + "' cannot be opened (corrupt or truncated)");
  }
  Handle group(H5Gopen2(file.get(), "/gridfeed", H5P_DEFAULT), H5Gclose);
  if (!group.ok()) return DataLoss("checkpoint '" + path + "' has no /gridfeed group");
  const hid_t g = group.get();
  constexpr int64_t kAny = std::numeric_limits<int64_t>::min();
  GRIDFEED_ASSIGN_OR_RETURN(auto version, ReadInts(g, {"format_version", 1, 1, kAny}, path));
  if (version[0] > kFormatVersion) {
    return FailedPrecondition("checkpoint '" + path + "' has format version " +
                              std::to_string(version[0]) + "; this gridfeed reads up to " +
                              std::to_string(kFormatVersion) + " (upgrade gridfeed)");
  }
  if (version[0] < 1) {
    return DataLoss("checkpoint '" + path + "': dataset /gridfeed/format_version holds " +
                    std::to_string(version[0]) + ", not a format version (1 to " +
                    std::to_string(kFormatVersion) + ")");
  }
  Cursor c;
  GRIDFEED_ASSIGN_OR_RETURN(c.fingerprint, ReadString(g, "fingerprint", path));
  GRIDFEED_ASSIGN_OR_RETURN(c.canonical_config, ReadString(g, "canonical_config", path));
  const htri_t has_facts = H5Aexists(g, "token_store_facts");
  if (has_facts < 0) return DataLoss("checkpoint '" + path + "': unreadable attribute list");
  if (has_facts > 0) {
    GRIDFEED_ASSIGN_OR_RETURN(c.token_store_facts, ReadString(g, "token_store_facts", path));
  }
  const htri_t has_position = H5Aexists(g, "order_position");
  if (has_position < 0) return DataLoss("checkpoint '" + path + "': unreadable attribute list");
  if (has_position > 0) {
    GRIDFEED_ASSIGN_OR_RETURN(c.order_position, ReadString(g, "order_position", path));
  }
  const htri_t has_history = H5Aexists(g, "schedule_history");
  if (has_history < 0) return DataLoss("checkpoint '" + path + "': unreadable attribute list");
  if (has_history > 0) {
    GRIDFEED_ASSIGN_OR_RETURN(c.schedule_history, ReadString(g, "schedule_history", path));
  }
  auto scalar = [&](const char* name, int64_t* out) -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(auto v, ReadInts(g, {name, 1, 1, 0}, path));
    *out = v[0];
    return Status::Ok();
  };
  GRIDFEED_RETURN_IF_ERROR(scalar("iteration", &c.iteration));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_train_samples", &c.consumed_train_samples));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_valid_samples", &c.consumed_valid_samples));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_test_samples", &c.consumed_test_samples));
  GRIDFEED_ASSIGN_OR_RETURN(c.source_samples,
                            ReadInts(g, {"source_consumed_samples", 0, kMaxSources, 0}, path));
  GRIDFEED_ASSIGN_OR_RETURN(c.source_tokens,
                            ReadInts(g, {"source_consumed_tokens", 0, kMaxSources, 0}, path));
  if (c.source_tokens.size() != c.source_samples.size()) {
    return DataLoss("checkpoint '" + path + "': dataset /gridfeed/source_consumed_tokens has " +
                    std::to_string(c.source_tokens.size()) +
                    " elements, /gridfeed/source_consumed_samples " +
                    std::to_string(c.source_samples.size()));
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto grid, ReadInts(g, {"grid_dp_tp_pp_cp", 4, 4, 1}, path));
  GRIDFEED_ASSIGN_OR_RETURN(auto batch, ReadInts(g, {"micro_global_batch_size", 2, 2, 1}, path));
  c.dp = grid[0], c.tp = grid[1], c.pp = grid[2], c.cp = grid[3];
  c.micro_batch_size = batch[0], c.global_batch_size = batch[1];
  if (const std::string why = Implausible(c); !why.empty()) {
    return DataLoss("checkpoint '" + path + "': " + why + " (forged or corrupt)");
  }
  return c;
}

}  // namespace gridfeed::checkpoint
