#include "gridfeed/order/sft/jsonl_rows.h"

#include <cstring>

namespace gridfeed::order::sft {

Result<JsonlRows> JsonlRows::Open(const std::string& path) {
  JsonlRows rows;
  GRIDFEED_ASSIGN_OR_RETURN(rows.file_, io::MMapFile::Open(path));
  const auto bytes = rows.file_.bytes();
  const char* data = reinterpret_cast<const char*>(bytes.data());
  const size_t n = bytes.size();
  size_t at = 0;
  while (at < n) {
    const void* nl = std::memchr(data + at, '\n', n - at);
    const size_t stop = nl ? static_cast<size_t>(static_cast<const char*>(nl) - data) : n;
    size_t end = stop;
    if (end > at && data[end - 1] == '\r') --end;  // CRLF files
    bool blank = true;
    for (size_t i = at; i < end && blank; ++i) {
      blank = data[i] == ' ' || data[i] == '\t' || data[i] == '\r';
    }
    if (!blank) {
      rows.begin_.push_back(at);
      rows.end_.push_back(end);
    }
    at = stop + 1;
  }
  if (rows.begin_.empty()) return InvalidArgument(path + ": a JSON Lines file without rows");
  return rows;
}

std::string_view JsonlRows::Row(int64_t k) const {
  const char* data = reinterpret_cast<const char*>(file_.bytes().data());
  const auto i = static_cast<size_t>(k);
  return {data + begin_[i], end_[i] - begin_[i]};
}

}  // namespace gridfeed::order::sft
