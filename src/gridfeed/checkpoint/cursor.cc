#include "gridfeed/checkpoint/cursor.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace gridfeed::checkpoint {
namespace {

// Closes an HDF5 handle on scope exit.
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
  const hsize_t n = values.size();
  const hsize_t chunk = std::max<hsize_t>(n, 1);
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(plist.get(), 1, &chunk);
  H5Pset_fletcher32(plist.get());
  Handle ds(
      H5Dcreate2(group, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
      H5Dclose);
  if (!ds.ok()) return IoError(std::string("cannot create dataset /gridfeed/") + name);
  if (n > 0 &&
      H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    return IoError(std::string("cannot write dataset /gridfeed/") + name);
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> ReadInts(hid_t group, const char* name, const std::string& path) {
  Handle ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) {
    return DataLoss("checkpoint '" + path + "': dataset /gridfeed/" + name + " is missing");
  }
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  std::vector<int64_t> out(n);
  if (n > 0 && H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
    return DataLoss("checkpoint '" + path + "': dataset /gridfeed/" + name +
                    " fails its Fletcher32 checksum or cannot be read (corrupt file)");
  }
  return out;
}

Status WriteString(hid_t group, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), value.empty() ? "" : value.data()) < 0) {
    return IoError(std::string("cannot write attribute ") + name);
  }
  return Status::Ok();
}

Result<std::string> ReadString(hid_t group, const char* name, const std::string& path) {
  Handle attr(H5Aopen(group, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return DataLoss("checkpoint '" + path + "': attribute " + name + " is missing");
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  const size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) {
    return DataLoss("checkpoint '" + path + "': attribute " + name + " cannot be read");
  }
  out.resize(std::strlen(out.c_str()));
  return out;
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return IoError("cannot open '" + path + "' to fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError("cannot fsync '" + path + "': " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Status WriteCursor(const std::string& path, const Cursor& c) {
  QuietHdf5();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) return IoError("cannot create checkpoint '" + tmp + "'");
    Handle group(H5Gcreate2(file.get(), "/gridfeed", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Gclose);
    if (!group.ok()) return IoError("cannot create group /gridfeed in '" + tmp + "'");
    const hid_t g = group.get();
    Status st = WriteInts(g, "format_version", {kFormatVersion});
    if (st.ok()) st = WriteString(g, "fingerprint", c.fingerprint);
    if (st.ok()) st = WriteString(g, "canonical_config", c.canonical_config);
    if (st.ok()) st = WriteInts(g, "iteration", {c.iteration});
    if (st.ok()) st = WriteInts(g, "consumed_train_samples", {c.consumed_train_samples});
    if (st.ok()) st = WriteInts(g, "consumed_valid_samples", {c.consumed_valid_samples});
    if (st.ok()) st = WriteInts(g, "consumed_test_samples", {c.consumed_test_samples});
    if (st.ok()) st = WriteInts(g, "source_consumed_samples", c.source_samples);
    if (st.ok()) st = WriteInts(g, "source_consumed_tokens", c.source_tokens);
    if (st.ok()) st = WriteInts(g, "grid_dp_tp_pp_cp", {c.dp, c.tp, c.pp, c.cp});
    if (st.ok()) {
      st = WriteInts(g, "micro_global_batch_size", {c.micro_batch_size, c.global_batch_size});
    }
    if (!st.ok()) {
      std::remove(tmp.c_str());
      return st.WithContext("checkpoint '" + path + "'");
    }
  }
  Status st = FsyncPath(tmp, false);
  // Tests only (GRIDFEED_TESTING_CRASH_BEFORE_RENAME=<iteration>): die between the complete
  // temporary file and the rename, the window in which a crash must leave the previous checkpoint
  // intact.
  if (const char* v = std::getenv("GRIDFEED_TESTING_CRASH_BEFORE_RENAME");
      v && std::atoll(v) == c.iteration) {
    std::raise(SIGKILL);
  }
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = IoError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st;
  }
  const auto dir = std::filesystem::absolute(path).parent_path().string();
  return FsyncPath(dir, true);
}

Result<Cursor> ReadCursor(const std::string& path) {
  QuietHdf5();
  if (!std::filesystem::exists(path)) return NotFound("no checkpoint file '" + path + "'");
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
  GRIDFEED_ASSIGN_OR_RETURN(auto version, ReadInts(g, "format_version", path));
  if (version.size() != 1) return DataLoss("checkpoint '" + path + "': bad format_version");
  if (version[0] > kFormatVersion) {
    return FailedPrecondition("checkpoint '" + path + "' has format version " +
                              std::to_string(version[0]) + "; this gridfeed reads up to " +
                              std::to_string(kFormatVersion) + " (upgrade gridfeed)");
  }
  Cursor c;
  GRIDFEED_ASSIGN_OR_RETURN(c.fingerprint, ReadString(g, "fingerprint", path));
  GRIDFEED_ASSIGN_OR_RETURN(c.canonical_config, ReadString(g, "canonical_config", path));
  auto scalar = [&](const char* name, int64_t* out) -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(auto v, ReadInts(g, name, path));
    if (v.size() != 1) return DataLoss("checkpoint '" + path + "': " + name + " is not a scalar");
    *out = v[0];
    return Status::Ok();
  };
  GRIDFEED_RETURN_IF_ERROR(scalar("iteration", &c.iteration));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_train_samples", &c.consumed_train_samples));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_valid_samples", &c.consumed_valid_samples));
  GRIDFEED_RETURN_IF_ERROR(scalar("consumed_test_samples", &c.consumed_test_samples));
  GRIDFEED_ASSIGN_OR_RETURN(c.source_samples, ReadInts(g, "source_consumed_samples", path));
  GRIDFEED_ASSIGN_OR_RETURN(c.source_tokens, ReadInts(g, "source_consumed_tokens", path));
  GRIDFEED_ASSIGN_OR_RETURN(auto grid, ReadInts(g, "grid_dp_tp_pp_cp", path));
  GRIDFEED_ASSIGN_OR_RETURN(auto batch, ReadInts(g, "micro_global_batch_size", path));
  if (grid.size() != 4 || batch.size() != 2) {
    return DataLoss("checkpoint '" + path + "': grid or batch sizes malformed");
  }
  c.dp = grid[0], c.tp = grid[1], c.pp = grid[2], c.cp = grid[3];
  c.micro_batch_size = batch[0], c.global_batch_size = batch[1];
  return c;
}

}  // namespace gridfeed::checkpoint
