#include "gridfeed/order/offline_output.h"

#include <sstream>
#include <utility>

#include "gridfeed/core/parse.h"

namespace gridfeed::order {
namespace {

Result<std::vector<int64_t>> ParseText(const std::string& spec, int64_t length,
                                       const std::string& who) {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [a, b)
  std::stringstream ss(spec);
  std::string part;
  auto num = [&](const std::string& s) -> Result<int64_t> {
    const auto v = ParseInt64(s);
    if (!v || *v < 0) {
      return InvalidArgument(who + ": '" + s + "' is not a non-negative integer");
    }
    return *v;
  };
  while (std::getline(ss, part, ',')) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t v, num(part));
      ranges.push_back({v, v + 1});
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(int64_t a, num(part.substr(0, colon)));
      GRIDFEED_ASSIGN_OR_RETURN(int64_t b, num(part.substr(colon + 1)));
      if (b <= a) return InvalidArgument(who + ": empty range '" + part + "'");
      ranges.push_back({a, b});
    }
  }
  int64_t total = 0;
  for (const auto& [a, b] : ranges) {
    if (b > length) {
      return OutOfRange(who + ": " + std::to_string(b - 1) + " is beyond the split's " +
                        std::to_string(length) + " samples");
    }
    total += b - a;  // each part lies in [0, length)
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(total));
  for (const auto& [a, b] : ranges) {
    for (int64_t v = a; v < b; ++v) out.push_back(v);
  }
  return out;
}

}  // namespace

Result<std::vector<int64_t>> PositionRequest::Resolve(int64_t length) const {
  if (!list) return ParseText(text, length, who);
  for (int64_t p : *list) {
    if (p < 0) return InvalidArgument(who + ": negative position " + std::to_string(p));
    if (p >= length) {
      return OutOfRange(who + ": position " + std::to_string(p) + " is beyond the split's " +
                        std::to_string(length) + " samples");
    }
  }
  return *list;
}

}  // namespace gridfeed::order
