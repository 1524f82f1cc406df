#include "gridfeed/config/data_args.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "gridfeed/core/log.h"
#include "gridfeed/core/python_float.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::config {
namespace {

constexpr int kMaxJsonDepth = 8;
constexpr int64_t kMaxCount = int64_t{1} << 62;

std::string Where(const char* flag, const std::string& path) {
  return std::string(flag) + " '" + path + "'";
}

// The whole file, refused above kMaxDataArgsFileBytes before it is read.
Result<std::string> ReadBounded(const char* flag, const std::string& path) {
  const std::string where = Where(flag, path);
  auto fd = io::OpenRegularFile(path, flag);  // "cannot open --flag 'path': ..."
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return IoError(where + ": cannot stat: " + std::strerror(err));
  }
  if (st.st_size > kMaxDataArgsFileBytes) {
    ::close(*fd);
    return InvalidArgument(where + " is " + std::to_string(st.st_size) +
                           " bytes, more than the 64 MiB a data list may hold");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t have = 0;
  while (have < out.size()) {
    const ssize_t n = ::read(*fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return IoError(where + ": cannot read: " + std::strerror(err));
    }
    if (n == 0) break;  // shrank while read: what is there
    have += static_cast<size_t>(n);
  }
  ::close(*fd);
  out.resize(have);
  return out;
}

// The nesting of arrays and objects and the number of values (commas and openings), outside
// strings: the parser is not asked to build deeper or larger documents than these formats have.
struct JsonShape {
  int depth = 0;
  int64_t values = 0;
};
JsonShape ShapeOf(const std::string& text) {
  JsonShape shape;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      shape.depth = std::max(shape.depth, ++depth);
      ++shape.values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',') {
      ++shape.values;
    }
  }
  return shape;
}

Result<nlohmann::json> ParseJson(const char* flag, const std::string& path) {
  GRIDFEED_ASSIGN_OR_RETURN(const std::string text, ReadBounded(flag, path));
  const JsonShape shape = ShapeOf(text);
  if (shape.depth > kMaxJsonDepth) {
    return InvalidArgument(Where(flag, path) + " nests deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels; not this format");
  }
  if (shape.values > 4 * kMaxDataArgsEntries) {
    return InvalidArgument(Where(flag, path) + " holds more than " +
                           std::to_string(4 * kMaxDataArgsEntries) + " JSON values");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(Where(flag, path) + " is not valid JSON: " + e.what());
  }
}

// Python's str.split(): runs of whitespace separate, none at either end.
std::vector<std::string> SplitWhitespace(const std::string& text, size_t limit, bool* too_many) {
  std::vector<std::string> out;
  *too_many = false;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) break;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (out.size() == limit) {
      *too_many = true;
      return out;
    }
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string TooMany(const std::string& where) {
  return where + " holds more than " + std::to_string(kMaxDataArgsEntries) +
         " entries (weights and prefixes)";
}

// One per-split value: an array of strings and numbers, a string, or null.
Result<std::optional<std::vector<std::string>>> SplitList(const std::string& where,
                                                          const nlohmann::json& v) {
  if (v.is_null()) return std::optional<std::vector<std::string>>();
  std::vector<std::string> entries;
  std::vector<bool> number;
  if (v.is_string()) {
    bool too_many = false;
    entries = SplitWhitespace(v.get<std::string>(), kMaxDataArgsEntries, &too_many);
    if (too_many) return InvalidArgument(TooMany(where));
    number.assign(entries.size(), false);
  } else if (v.is_array()) {
    if (static_cast<int64_t>(v.size()) > kMaxDataArgsEntries)
      return InvalidArgument(TooMany(where));
    for (size_t i = 0; i < v.size(); ++i) {
      const auto& e = v[i];
      if (e.is_string()) {
        entries.push_back(e.get<std::string>());
        number.push_back(false);
      } else if (e.is_number()) {
        entries.push_back(e.dump());  // round-trips: Python's float() reads the same double
        number.push_back(true);
      } else {
        return InvalidArgument(where + ": entry " + std::to_string(i + 1) + " is " + e.dump() +
                               ", neither a prefix (string) nor a weight (number)");
      }
    }
  } else {
    return InvalidArgument(where +
                           " must be a list of weights and prefixes, a string of them, "
                           "or null; got " +
                           std::string(v.type_name()));
  }
  if (entries.empty()) {
    return InvalidArgument(where + " is empty (give null for no data in this split)");
  }
  GRIDFEED_RETURN_IF_ERROR(CheckDataPathList(where, entries));
  // A number is a weight: only in the weight places of a weighted list.
  const bool weighted = entries.size() % 2 == 0 && ParsePythonFloat(entries[0]).has_value();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (number[i] && !(weighted && i % 2 == 0)) {
      return InvalidArgument(where + ": entry " + std::to_string(i + 1) + " (" + entries[i] +
                             ") is a number where a prefix is expected");
    }
  }
  return std::optional<std::vector<std::string>>(std::move(entries));
}

Result<int64_t> Count(const std::string& where, const nlohmann::json& v, const char* what) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() >= kMaxCount) ||
      (!v.is_number_unsigned() && (v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxCount))) {
    return InvalidArgument(where + ": the " + std::string(what) + " " + v.dump() +
                           " is not an integer in [0, 2^62)");
  }
  return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}

}  // namespace

Status CheckDataPathList(const std::string& where, const std::vector<std::string>& entries) {
  if (entries.empty()) return InvalidArgument(where + " holds no prefix");
  const size_t n = entries.size();
  auto weight = [&](size_t i) { return ParsePythonFloat(entries[i]).has_value(); };
  if (n % 2 == 1) {
    // Megatron reads an odd count as prefixes only; "W P W" means a pair lost a half.
    if (weight(0) && (n == 1 || !weight(1))) {
      return InvalidArgument(where + " holds " + std::to_string(n) +
                             " entries, an odd count, but starts with the weight '" + entries[0] +
                             "': give 'W1 P1 W2 P2 ...' pairs (a weight or a prefix is missing) " +
                             "or only prefixes");
    }
    return Status::Ok();
  }
  size_t first_weight = n, first_other = n;
  for (size_t i = 0; i < n; i += 2) {
    if (weight(i)) {
      first_weight = std::min(first_weight, i);
    } else {
      first_other = std::min(first_other, i);
    }
  }
  if (first_weight < n && first_other < n) {
    return InvalidArgument(where + ": entry " + std::to_string(first_other + 1) + " ('" +
                           entries[first_other] + "') is not a number, but entry " +
                           std::to_string(first_weight + 1) + " ('" + entries[first_weight] +
                           "') is a weight: give 'W1 P1 W2 P2 ...' with a number for every " +
                           "weight, or only prefixes");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ReadDataArgs(const std::string& path) {
  const std::string where = Where("--data-args-path", path);
  GRIDFEED_ASSIGN_OR_RETURN(const std::string text, ReadBounded("--data-args-path", path));
  bool too_many = false;
  std::vector<std::string> entries = SplitWhitespace(text, kMaxDataArgsEntries, &too_many);
  if (too_many) return InvalidArgument(TooMany(where));
  GRIDFEED_RETURN_IF_ERROR(CheckDataPathList(where, entries));
  return entries;
}

Result<std::array<std::optional<std::vector<std::string>>, 3>> ReadPerSplitDataArgs(
    const std::string& path) {
  const char* flag = "--per-split-data-args-path";
  const std::string where = Where(flag, path);
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(flag, path));
  if (!j.is_object()) {
    return InvalidArgument(where + " must be a JSON object with keys train, valid and test");
  }
  constexpr const char* kKeys[3] = {"train", "valid", "test"};
  std::array<std::optional<std::vector<std::string>>, 3> out;
  for (int i = 0; i < 3; ++i) {
    if (!j.contains(kKeys[i])) {
      return InvalidArgument(where + " has no key \"" + kKeys[i] +
                             "\" (Megatron reads train, valid and test; give null for none)");
    }
    GRIDFEED_ASSIGN_OR_RETURN(out[i], SplitList(where + " \"" + kKeys[i] + "\"", j[kKeys[i]]));
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "train" && key != "valid" && key != "test") {
      log::Warn(where + ": key \"" + key + "\" is not train, valid or test; ignored (as Megatron)");
    }
  }
  if (!out[0] && !out[1] && !out[2]) {
    return InvalidArgument(where + " names no dataset: train, valid and test are all null");
  }
  return out;
}

Result<SequencesPerDataset> ReadPerDatasetSequences(const std::string& path) {
  const char* flag = "--per-dataset-sequences-path";
  const std::string where = Where(flag, path);
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(flag, path));
  if (!j.is_object()) {
    return InvalidArgument(where +
                           " must be a JSON object {\"PREFIX\": [sequence count, document "
                           "count], ...}");
  }
  SequencesPerDataset out;
  for (const auto& [prefix, v] : j.items()) {
    const std::string at = where + " \"" + prefix + "\"";
    if (!v.is_array() || v.size() != 2) {
      return InvalidArgument(at + " must be [sequence count, document count], got " + v.dump());
    }
    GRIDFEED_ASSIGN_OR_RETURN(const int64_t sequences, Count(at, v[0], "sequence count"));
    GRIDFEED_ASSIGN_OR_RETURN(const int64_t documents, Count(at, v[1], "document count"));
    out[prefix] = {sequences, documents};
  }
  return out;
}

std::string PerDatasetSequencesJson(
    const std::vector<std::pair<std::string, std::array<int64_t, 2>>>& counts) {
  std::string s = "{";
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) s += ", ";
    s += nlohmann::json(counts[i].first).dump(-1, ' ', /*ensure_ascii=*/true);
    s += ": [" + std::to_string(counts[i].second[0]) + ", " + std::to_string(counts[i].second[1]) +
         "]";
  }
  return s + "}";
}

Status LoadDataArgFiles(JobOptions* o) {
  DataOptions& d = o->data;
  const bool per_split_inline =
      !d.train_data_path.empty() || !d.valid_data_path.empty() || !d.test_data_path.empty();
  if (!d.data_args_path.empty()) {
    if (!d.data_path.empty()) {
      return InvalidArgument("--data-path and --data-args-path '" + d.data_args_path +
                             "' are exclusive (Megatron asserts one is unset): give the list "
                             "inline or in the file");
    }
    if (per_split_inline || !d.per_split_data_args_path.empty()) {
      return InvalidArgument("--data-args-path '" + d.data_args_path +
                             "' (one blend split by --split) and per-split lists "
                             "(--train/valid/test-data-path, --per-split-data-args-path) are "
                             "exclusive");
    }
    GRIDFEED_ASSIGN_OR_RETURN(d.data_path, ReadDataArgs(d.data_args_path));
  }
  if (!d.per_split_data_args_path.empty()) {
    const std::string& path = d.per_split_data_args_path;
    if (per_split_inline) {
      return InvalidArgument("--train/valid/test-data-path and --per-split-data-args-path '" +
                             path + "' are exclusive (Megatron asserts one is unset)");
    }
    if (!d.data_path.empty()) {
      return InvalidArgument("--data-path and --per-split-data-args-path '" + path +
                             "' are exclusive: one blend split by --split, or a list per split");
    }
    if (!d.split.empty()) {
      return InvalidArgument("--split '" + d.split + "' and --per-split-data-args-path '" + path +
                             "' are incompatible (each split has its own list; Megatron asserts "
                             "split is None)");
    }
    GRIDFEED_ASSIGN_OR_RETURN(auto lists, ReadPerSplitDataArgs(path));
    std::vector<std::string>* fields[3] = {&d.train_data_path, &d.valid_data_path,
                                           &d.test_data_path};
    for (int i = 0; i < 3; ++i) {
      if (lists[i]) *fields[i] = std::move(*lists[i]);
    }
  }
  if (!d.per_dataset_sequences_path.empty()) {
    GRIDFEED_ASSIGN_OR_RETURN(SequencesPerDataset counts,
                              ReadPerDatasetSequences(d.per_dataset_sequences_path));
    d.sequences_per_dataset = std::make_shared<const SequencesPerDataset>(std::move(counts));
  }
  d.data_arg_files_read = true;
  return Status::Ok();
}

}  // namespace gridfeed::config
