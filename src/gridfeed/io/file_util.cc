#include "gridfeed/io/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace gridfeed::io {

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  AtomicFile f;
  f.path_ = path;
  f.tmp_path_ = path + ".tmp." + std::to_string(::getpid());
  f.file_ = std::fopen(f.tmp_path_.c_str(), "wb");
  if (f.file_ == nullptr) {
    return IoError("cannot create '" + f.tmp_path_ + "': " + std::strerror(errno));
  }
  std::setvbuf(f.file_, nullptr, _IOFBF, 1 << 20);
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_path_(std::move(o.tmp_path_)),
      file_(std::exchange(o.file_, nullptr)),
      committed_(o.committed_),
      published_(std::exchange(o.published_, true)),
      bytes_written_(o.bytes_written_) {}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) std::fclose(file_);
  if (!published_ && !tmp_path_.empty()) std::remove(tmp_path_.c_str());
}

Status AtomicFile::Write(const void* data, size_t size) {
  if (size == 0) return Status::Ok();
  if (std::fwrite(data, 1, size, file_) != size) {
    return IoError("cannot write '" + tmp_path_ + "': " + std::strerror(errno));
  }
  bytes_written_ += size;
  return Status::Ok();
}

Status AtomicFile::Commit(bool publish) {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    return IoError("cannot flush '" + tmp_path_ + "': " + std::strerror(errno));
  }
  std::fclose(file_);
  file_ = nullptr;
  committed_ = true;
  return publish ? Publish() : Status::Ok();
}

Status AtomicFile::Publish() {
  if (!committed_) return Internal("Publish before Commit for '" + path_ + "'");
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return IoError("cannot rename '" + tmp_path_ + "' to '" + path_ + "': " + std::strerror(errno));
  }
  published_ = true;
  return Status::Ok();
}

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return NotFound("no such file: '" + path + "'");
    return IoError("cannot read '" + path + "'");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteStringToFile(const std::string& path, const std::string& contents) {
  GRIDFEED_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  GRIDFEED_RETURN_IF_ERROR(f.Write(contents.data(), contents.size()));
  return f.Commit();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return IoError("cannot create directory '" + path + "': " + ec.message());
  return Status::Ok();
}

}  // namespace gridfeed::io
