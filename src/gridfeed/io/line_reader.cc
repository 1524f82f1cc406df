#include "gridfeed/io/line_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gridfeed::io {

struct LineReader::Impl {
  gzFile file = nullptr;
  std::string path;
  ~Impl() {
    if (file != nullptr) gzclose(file);
  }
};

Result<LineReader> LineReader::Open(const std::string& path) {
  if (!std::filesystem::exists(path)) return NotFound("no such input file: '" + path + "'");
  LineReader r;
  r.impl_ = std::make_unique<Impl>();
  r.impl_->path = path;
  r.impl_->file = gzopen(path.c_str(), "rb");
  if (r.impl_->file == nullptr) {
    return IoError("cannot open input '" + path + "': " + std::strerror(errno));
  }
  gzbuffer(r.impl_->file, 1 << 20);
  return r;
}

LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;
LineReader::~LineReader() = default;

bool LineReader::Next(std::string* line) {
  line->clear();
  char buf[1 << 16];
  bool got_any = false;
  while (gzgets(impl_->file, buf, sizeof(buf)) != nullptr) {
    got_any = true;
    size_t n = std::strlen(buf);
    bytes_read_ += n;
    if (n > 0 && buf[n - 1] == '\n') {
      line->append(buf, n - 1);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      return true;
    }
    line->append(buf, n);
  }
  int err = 0;
  const char* msg = gzerror(impl_->file, &err);
  if (err != Z_OK && err != Z_BUF_ERROR) {
    status_ = DataLoss("cannot read '" + impl_->path + "': " + (msg ? msg : "gzip error"));
    return false;
  }
  if (!gzeof(impl_->file) && err == Z_BUF_ERROR) {
    status_ = DataLoss("cannot read '" + impl_->path + "': truncated gzip stream");
    return false;
  }
  return got_any;
}

}  // namespace gridfeed::io
