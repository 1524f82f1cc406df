#include "gridfeed/config/canonical.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

namespace gridfeed::config {
namespace {

using nlohmann::json;

json CanonicalValue(const OptionRow& row, const JobOptions& o) {
  return std::visit(
      [&](auto* p) -> json {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!row.canonical_choices.empty()) {
            const auto it = std::find(row.choices.begin(), row.choices.end(), *p);
            if (it != row.choices.end()) return row.canonical_choices[it - row.choices.begin()];
          }
        }
        return json(*p);
      },
      Get(row, o));
}

Status SetFromCanonical(const OptionRow& row, const json& v, JobOptions* o) {
  const std::string key = row.key();
  auto wrong = [&](const char* want) {
    return DataLoss("canonical configuration: '" + key + "' must be " + want + ", got " + v.dump());
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!v.is_string()) return wrong("a string");
          std::string s = v.get<std::string>();
          if (!row.choices.empty()) {
            const auto& spelled =
                row.canonical_choices.empty() ? row.choices : row.canonical_choices;
            const auto it = std::find(spelled.begin(), spelled.end(), s);
            if (it == spelled.end()) return wrong("one of the known choices");
            s = row.choices[it - spelled.begin()];
          }
          *p = s;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (!v.is_array()) return wrong("a list of strings");
          p->clear();
          for (const auto& e : v) {
            if (!e.is_string()) return wrong("a list of strings");
            p->push_back(e.get<std::string>());
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) return wrong("true or false");
          *p = v.get<bool>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!v.is_number()) return wrong("a number");
          *p = v.get<double>();
        } else {
          if (!v.is_number_integer()) return wrong("an integer");
          *p = v.get<int64_t>();
        }
        return Status::Ok();
      },
      row.field(*o));
}

}  // namespace

std::string CanonicalText(const DataOptions& data, const std::string& data_facts) {
  JobOptions o;
  o.data = data;
  const JobOptions defaults;
  json j = json::object();
  for (const auto& row : OptionTable()) {
    if (row.canonical == Canonical::kNo) continue;
    if (row.canonical == Canonical::kUnlessDefault && SameValue(row, o, defaults)) continue;
    if (row.canonical == Canonical::kFimOnly && (!data.is_fim() || SameValue(row, o, defaults))) {
      continue;
    }
    j[row.key()] = CanonicalValue(row, o);
  }
  if (!data_facts.empty()) j[kDataFactsKey] = json::parse(data_facts, nullptr, false);
  return j.dump();  // nlohmann::json objects keep keys sorted
}

Result<DataOptions> FromCanonical(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLoss("the configuration text is not a JSON object");
  }
  JobOptions o;
  for (const auto& [key, value] : j.items()) {
    if (key == kDataFactsKey) continue;
    const auto rows = OptionTable();
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const OptionRow& r) {
      return r.canonical != Canonical::kNo && key == r.key();
    });
    if (row == rows.end()) {
      return DataLoss("the configuration text has the field '" + key +
                      "', which this gridfeed does not know (written by a newer version?)");
    }
    GRIDFEED_RETURN_IF_ERROR(SetFromCanonical(*row, value, &o));
  }
  for (const auto& row : OptionTable()) {
    if (row.canonical == Canonical::kAlways && !j.contains(row.key())) {
      return DataLoss(std::string("the configuration text lacks the field '") + row.key() + "'");
    }
  }
  return o.data;
}

std::string FingerprintOf(const std::string& canonical) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(canonical.data(), canonical.size())));
  return hex;
}

std::string DescribeChange(const std::string& before, const std::string& after) {
  const json a = json::parse(before, nullptr, false);
  const json b = json::parse(after, nullptr, false);
  if (a.is_discarded() || b.is_discarded() || !a.is_object() || !b.is_object()) {
    return "the configuration text differs";
  }
  // A key one side lacks is an option the text leaves out at its default: name that value.
  auto default_of = [](const std::string& key) -> std::optional<json> {
    for (const auto& row : OptionTable()) {
      if (row.key() != key) continue;
      if (row.canonical != Canonical::kUnlessDefault && row.canonical != Canonical::kFimOnly) {
        return std::nullopt;
      }
      return CanonicalValue(row, JobOptions());
    }
    return std::nullopt;
  };
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key)) {
      const auto d = default_of(key);
      return key + ": " + value.dump() + " in the checkpoint, " +
             (d ? d->dump() + " now (the default)" : std::string("absent now"));
    }
    if (b[key] != value) return key + ": " + value.dump() + " -> " + b[key].dump();
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) {
      const auto d = default_of(key);
      return key + ": " +
             (d ? d->dump() +
                      " in the checkpoint (the default, which the checkpoint does not "
                      "write), "
                : std::string("absent in the checkpoint, ")) +
             value.dump() + " now";
    }
  }
  return "the configuration text differs";
}

std::string MixtureScheduleOf(const std::string& canonical) {
  const json j = json::parse(canonical, nullptr, false);
  if (!j.is_object() || !j.contains("mixture-schedule") || !j["mixture-schedule"].is_string()) {
    return "";
  }
  return j["mixture-schedule"].get<std::string>();
}

std::string WithoutMixtureSchedule(const std::string& canonical) {
  json j = json::parse(canonical, nullptr, false);
  if (!j.is_object()) return "null";
  j.erase("mixture-schedule");
  if (j.contains(kDataFactsKey) && j[kDataFactsKey].is_object()) j[kDataFactsKey].erase("mixture");
  return j.dump();
}

}  // namespace gridfeed::config
