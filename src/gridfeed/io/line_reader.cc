#include "gridfeed/io/line_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace gridfeed::io {

struct LineReader::Impl {
  gzFile file = nullptr;
  std::string path;
  std::vector<char> buffer = std::vector<char>(1 << 16);
  size_t begin = 0, end = 0;  // unread bytes of `buffer`
  bool eof = false;
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

// Lines are cut at '\n' with memchr, so a NUL byte stays inside its line (it does not end it)
// and line numbers stay right. Any zlib error, the end of a truncated stream included
// ("unexpected end of file", also when the cut falls on a line boundary), is DataLoss.
bool LineReader::Next(std::string* line) {
  line->clear();
  if (!status_.ok()) return false;
  Impl& r = *impl_;
  bool got_any = false;
  while (true) {
    if (r.begin < r.end) {
      got_any = true;
      const char* start = r.buffer.data() + r.begin;
      const size_t avail = r.end - r.begin;
      const void* nl = std::memchr(start, '\n', avail);
      const size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : avail;
      line->append(start, take);
      r.begin += take;
      bytes_read_ += take;
      if (nl) {
        ++r.begin;
        ++bytes_read_;
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return true;
      }
    }
    if (r.eof) return got_any;
    const int n = gzread(r.file, r.buffer.data(), static_cast<unsigned>(r.buffer.size()));
    int err = Z_OK;
    const char* msg = gzerror(r.file, &err);
    if (n < 0 || err != Z_OK) {
      std::string why = msg && *msg ? msg : "gzip error";
      if (err == Z_ERRNO) why = std::strerror(errno);
      if (err == Z_BUF_ERROR) why += " (truncated gzip stream)";
      status_ = DataLoss("cannot read '" + r.path + "': " + why);
      return false;
    }
    r.begin = 0;
    r.end = static_cast<size_t>(n);
    if (n == 0) r.eof = true;
  }
}

}  // namespace gridfeed::io
