// Reads a text file line by line, plain or gzip-compressed (detected from the content, so
// a .gz name is not required). Move-only; not thread safe.
#pragma once

#include <memory>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::io {

class LineReader {
 public:
  static Result<LineReader> Open(const std::string& path);
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;
  ~LineReader();

  // Reads the next line without its '\n' (and '\r'); NUL bytes are kept, only '\n' ends a
  // line. Returns false at end of file or on error; an error (DataLoss: unreadable input, corrupt
  // or truncated gzip stream, even when cut at a line boundary) is reported through status().
  bool Next(std::string* line);
  const Status& status() const { return status_; }
  // Bytes of (uncompressed) input consumed so far.
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  LineReader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Status status_;
  uint64_t bytes_read_ = 0;
};

}  // namespace gridfeed::io
