#include "gridfeed/config/mixture_schedule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "gridfeed/core/nearest_name.h"

namespace gridfeed::config {
namespace {

using Json = nlohmann::ordered_json;

constexpr double kMaxCount = 4.0e18;  // budgets and sizes stay far from int64 overflow

Status KeyError(const std::string& key, const std::string& what) {
  return InvalidArgument("mixture schedule: " + key + " " + what);
}

// A number given as a JSON number or as text (YAML scalars arrive as text: "800e9").
Result<double> Number(const Json& v, const std::string& key) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    errno = 0;
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && errno != ERANGE) return d;
  }
  return KeyError(key, "must be a number, got " + v.dump());
}

Result<double> NonNegative(const Json& v, const std::string& key) {
  auto d = Number(v, key);
  if (!d.ok()) return d.status();
  if (!std::isfinite(*d) || *d < 0) return KeyError(key, "must be a finite number >= 0");
  return *d;
}

// A whole count in (0, 4e18] (or [0, ...] with allow_zero); 800e9 is fine, 1.5 is not.
Result<int64_t> Count(const Json& v, const std::string& key, bool allow_zero) {
  auto d = Number(v, key);
  if (!d.ok()) return d.status();
  if (!std::isfinite(*d) || *d < (allow_zero ? 0 : 1) || *d > kMaxCount || std::floor(*d) != *d) {
    return KeyError(key, std::string("must be a whole number ") + (allow_zero ? ">= 0" : ">= 1") +
                             " (at most 4e18), got " + v.dump());
  }
  return static_cast<int64_t>(*d);
}

Result<std::string> Text(const Json& v, const std::string& key) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    return KeyError(key, "must be a non-empty text");
  }
  return v.get<std::string>();
}

std::vector<std::string> SourceNames(const MixtureSchedule& s) {
  std::vector<std::string> names;
  for (const auto& src : s.sources) names.push_back(src.name);
  return names;
}

const std::vector<std::string> kStageKeys = {
    "name",        "tokens", "samples",     "iterations",   "mixture",
    "temperature", "alpha",  "ramp_tokens", "ramp_samples", "seq_length"};

int SourceIndex(const MixtureSchedule& s, const std::string& name) {
  for (size_t k = 0; k < s.sources.size(); ++k) {
    if (s.sources[k].name == name) return static_cast<int>(k);
  }
  return -1;
}

Status ParseSources(const Json& v, MixtureSchedule* s) {
  auto add = [&](const std::string& name, const Json& spec, const std::string& key) -> Status {
    MixtureSource src;
    src.name = name;
    if (name.empty()) return KeyError(key, "has an empty source name");
    if (SourceIndex(*s, name) >= 0) return KeyError(key, "names source '" + name + "' twice");
    if (spec.is_string()) {
      src.path = spec.get<std::string>();
    } else if (spec.is_object()) {
      for (const auto& [k, x] : spec.items()) {
        if (k == "path") {
          GRIDFEED_ASSIGN_OR_RETURN(src.path, Text(x, key + ".path"));
        } else if (k == "tokens") {
          GRIDFEED_ASSIGN_OR_RETURN(src.tokens, Count(x, key + ".tokens", true));
        } else if (k != "name") {
          return KeyError(key + "." + k,
                          "is not a source key (path, tokens)" + DidYouMean(k, {"path", "tokens"}));
        }
      }
    } else {
      return KeyError(key, "must be a token store prefix or {path: ..., tokens: ...}");
    }
    if (src.path.empty()) return KeyError(key + ".path", "is missing");
    for (const auto& other : s->sources) {
      if (other.path == src.path) {
        return KeyError(key + ".path", "is source '" + other.name +
                                           "''s token store too: their samples would repeat");
      }
    }
    s->sources.push_back(src);
    return Status::Ok();
  };
  if (v.is_object()) {
    for (const auto& [name, spec] : v.items()) {
      GRIDFEED_RETURN_IF_ERROR(add(name, spec, "sources." + name));
    }
  } else if (v.is_array()) {  // the canonical form: [{name, path, tokens}, ...]
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string key = "sources[" + std::to_string(i) + "]";
      if (!v[i].is_object() || !v[i].contains("name")) return KeyError(key, "needs a name");
      GRIDFEED_ASSIGN_OR_RETURN(std::string name, Text(v[i]["name"], key + ".name"));
      GRIDFEED_RETURN_IF_ERROR(add(name, v[i], key));
    }
  } else {
    return KeyError("sources", "must map source names to token store prefixes");
  }
  if (s->sources.empty()) return KeyError("sources", "lists no source");
  return Status::Ok();
}

Status ParseStage(const Json& v, size_t i, MixtureSchedule* s) {
  const std::string at = "schedule[" + std::to_string(i) + "]";
  if (!v.is_object())
    return KeyError(at, "must be a mapping (name, tokens|samples|iterations, ...)");
  MixtureStage st;
  st.name = "stage" + std::to_string(i);
  int budgets = 0, weightings = 0, ramps = 0;
  for (const auto& [k, x] : v.items()) {
    const std::string key = at + "." + k;
    if (k == "name") {
      GRIDFEED_ASSIGN_OR_RETURN(st.name, Text(x, key));
    } else if (k == "tokens" || k == "samples" || k == "iterations") {
      ++budgets;
      st.unit = k == "tokens"    ? BudgetUnit::kTokens
                : k == "samples" ? BudgetUnit::kSamples
                                 : BudgetUnit::kIterations;
      GRIDFEED_ASSIGN_OR_RETURN(st.budget, Count(x, key, false));
    } else if (k == "mixture") {
      ++weightings;
      if (!x.is_object()) return KeyError(key, "must map source names to weights");
      st.weights.assign(s->sources.size(), 0.0);
      for (const auto& [name, w] : x.items()) {
        const int idx = SourceIndex(*s, name);
        if (idx < 0) {
          return KeyError(key + "." + name, "is not a source named under sources" +
                                                DidYouMean(name, SourceNames(*s)));
        }
        GRIDFEED_ASSIGN_OR_RETURN(st.weights[static_cast<size_t>(idx)],
                                  NonNegative(w, key + "." + name));
      }
      double sum = 0;
      for (double w : st.weights) sum += w;
      if (!(sum > 0) || !std::isfinite(sum)) {
        return KeyError(key, "must give some source a weight > 0 (and sum to a finite number)");
      }
    } else if (k == "temperature" || k == "alpha") {
      ++weightings;
      GRIDFEED_ASSIGN_OR_RETURN(double t, NonNegative(x, key));
      if (!(t > 0) || t > 1e6) return KeyError(key, "must be > 0 (and at most 1e6)");
      st.from_temperature = k == "temperature";
      st.size_exponent = st.from_temperature ? 1.0 / t : t;
    } else if (k == "ramp_tokens" || k == "ramp_samples") {
      ++ramps;
      st.ramp_unit = k == "ramp_tokens" ? BudgetUnit::kTokens : BudgetUnit::kSamples;
      GRIDFEED_ASSIGN_OR_RETURN(st.ramp, Count(x, key, true));
    } else if (k == "seq_length" || k == "seq-length") {
      GRIDFEED_ASSIGN_OR_RETURN(st.seq_length, Count(x, key, false));
      if (st.seq_length > kMaxStageSeqLength) {
        return KeyError(key, "must be at most " + std::to_string(kMaxStageSeqLength));
      }
    } else {
      return KeyError(key,
                      "is not a stage key (name, tokens|samples|iterations, "
                      "mixture|temperature|alpha, ramp_tokens|ramp_samples, seq_length)" +
                          DidYouMean(k, kStageKeys));
    }
  }
  if (budgets != 1) return KeyError(at, "needs exactly one of tokens, samples or iterations");
  if (weightings != 1) return KeyError(at, "needs exactly one of mixture, temperature or alpha");
  if (ramps > 1) return KeyError(at, "gives both ramp_tokens and ramp_samples");
  if (st.ramp > 0 && i == 0) {
    return KeyError(at + (st.ramp_unit == BudgetUnit::kTokens ? ".ramp_tokens" : ".ramp_samples"),
                    "cannot ramp: the first stage has no previous mixture");
  }
  if (st.ramp > 0 && st.ramp_unit == st.unit && st.ramp > st.budget) {
    return KeyError(at + (st.ramp_unit == BudgetUnit::kTokens ? ".ramp_tokens" : ".ramp_samples"),
                    "is longer than the stage (" + std::to_string(st.budget) + ")");
  }
  for (const auto& other : s->stages) {
    if (other.name == st.name) return KeyError(at + ".name", "repeats stage '" + st.name + "'");
  }
  s->stages.push_back(st);
  return Status::Ok();
}

Status ParseMaxEpochs(const Json& v, MixtureSchedule* s) {
  s->max_epochs.assign(s->sources.size(), 0.0);
  if (v.is_null()) return Status::Ok();
  if (!v.is_object()) return KeyError("max_epochs", "must map source names to epochs");
  for (const auto& [name, x] : v.items()) {
    const std::string key = "max_epochs." + name;
    const int idx = SourceIndex(*s, name);
    if (idx < 0) {
      return KeyError(key,
                      "is not a source named under sources" + DidYouMean(name, SourceNames(*s)));
    }
    GRIDFEED_ASSIGN_OR_RETURN(double e, NonNegative(x, key));
    if (!(e > 0) || e > 1e9) return KeyError(key, "must be > 0 (and at most 1e9)");
    s->max_epochs[static_cast<size_t>(idx)] = e;
  }
  return Status::Ok();
}

Result<MixtureSchedule> FromJson(const Json& root) {
  if (!root.is_object()) return KeyError("(root)", "must be a mapping");
  for (const auto& [k, v] : root.items()) {
    (void)v;
    if (!IsMixtureKey(k)) {
      return KeyError(k, "is not a schedule key (sources, schedule, max_epochs)" +
                             DidYouMean(k, {"sources", "schedule", "max_epochs"}));
    }
  }
  if (!root.contains("sources")) return KeyError("sources", "is missing (a schedule names them)");
  if (!root.contains("schedule")) return KeyError("schedule", "is missing (sources need stages)");
  MixtureSchedule s;
  GRIDFEED_RETURN_IF_ERROR(ParseSources(root["sources"], &s));
  const Json& stages = root["schedule"];
  if (!stages.is_array() || stages.empty()) {
    return KeyError("schedule", "must be a non-empty list of stages");
  }
  for (size_t i = 0; i < stages.size(); ++i) GRIDFEED_RETURN_IF_ERROR(ParseStage(stages[i], i, &s));
  GRIDFEED_RETURN_IF_ERROR(
      ParseMaxEpochs(root.contains("max_epochs") ? root["max_epochs"] : Json(), &s));
  return s;
}

// Nodes a schedule's YAML may expand to (aliases repeat nodes without repeating text).
constexpr int64_t kMaxScheduleNodes = int64_t{1} << 20;

// YAML -> JSON keeping mapping order (source order is source ids); scalars stay text. Counts
// the nodes visited against *budget before building anything for them.
Result<Json> ToJson(const YAML::Node& n, const std::string& key, int64_t* budget) {
  if (--*budget < 0) {
    return KeyError(key, "expands to more than " + std::to_string(kMaxScheduleNodes) +
                             " YAML nodes (aliases of aliases?); refusing to read it");
  }
  if (n.IsNull()) return Json();
  if (n.IsScalar()) return Json(n.Scalar());
  if (n.IsSequence()) {
    Json a = Json::array();
    for (size_t i = 0; i < n.size(); ++i) {
      GRIDFEED_ASSIGN_OR_RETURN(Json x, ToJson(n[i], key + "[" + std::to_string(i) + "]", budget));
      a.push_back(std::move(x));
    }
    return a;
  }
  if (n.IsMap()) {
    Json o = Json::object();
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) return KeyError(key, "has a key that is not a name");
      const std::string k = kv.first.Scalar();
      if (o.contains(k)) return KeyError(key + "." + k, "is given twice");
      GRIDFEED_ASSIGN_OR_RETURN(o[k], ToJson(kv.second, key.empty() ? k : key + "." + k, budget));
    }
    return o;
  }
  return KeyError(key, "has an unsupported YAML node");
}

}  // namespace

const char* BudgetUnitName(BudgetUnit u) {
  switch (u) {
    case BudgetUnit::kTokens:
      return "tokens";
    case BudgetUnit::kSamples:
      return "samples";
    case BudgetUnit::kIterations:
      return "iterations";
  }
  return "?";
}

std::string DescribeSourceReorder(const std::string& before, const std::string& after) {
  auto a = ParseMixtureSchedule(before);
  auto b = ParseMixtureSchedule(after);
  if (!a.ok() || !b.ok() || a->sources.size() != b->sources.size()) return "";
  std::vector<std::pair<std::string, std::string>> sa, sb;
  std::string saved, now;
  for (const auto& s : a->sources) {
    sa.emplace_back(s.name, s.path);
    saved += (saved.empty() ? "" : ", ") + s.name;
  }
  for (const auto& s : b->sources) {
    sb.emplace_back(s.name, s.path);
    now += (now.empty() ? "" : ", ") + s.name;
  }
  if (sa == sb) return "";
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  if (sa != sb) return "";
  return "the amended mixture schedule reorders the sources (saved: " + saved + "; now: " + now +
         "): a source's id is its place under sources, so the ids of the past would change; "
         "keep the saved order (the token files are unchanged)";
}

bool IsMixtureKey(const std::string& key) {
  return key == "sources" || key == "schedule" || key == "max_epochs";
}

Result<MixtureSchedule> ParseMixtureSchedule(const std::string& json_text) {
  Json root = Json::parse(json_text, nullptr, false);
  if (root.is_discarded()) {
    return InvalidArgument("--mixture-schedule is not JSON: " + json_text.substr(0, 80));
  }
  return FromJson(root);
}

std::string MixtureScheduleJson(const MixtureSchedule& s) {
  nlohmann::json root = nlohmann::json::object();
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& src : s.sources) {
    nlohmann::json j = {{"name", src.name}, {"path", src.path}};
    if (src.tokens > 0) j["tokens"] = src.tokens;
    sources.push_back(j);
  }
  root["sources"] = sources;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : s.stages) {
    nlohmann::json j = {{"name", st.name}, {BudgetUnitName(st.unit), st.budget}};
    if (!st.weights.empty()) {
      nlohmann::json m = nlohmann::json::object();
      for (size_t k = 0; k < st.weights.size(); ++k) {
        if (st.weights[k] > 0) m[s.sources[k].name] = st.weights[k];
      }
      j["mixture"] = m;
    } else if (st.from_temperature) {
      j["temperature"] = 1.0 / st.size_exponent;
    } else {
      j["alpha"] = st.size_exponent;
    }
    if (st.ramp > 0) {
      j[st.ramp_unit == BudgetUnit::kTokens ? "ramp_tokens" : "ramp_samples"] = st.ramp;
    }
    if (st.seq_length > 0) j["seq_length"] = st.seq_length;
    stages.push_back(j);
  }
  root["schedule"] = stages;
  nlohmann::json caps = nlohmann::json::object();
  for (size_t k = 0; k < s.max_epochs.size(); ++k) {
    if (s.max_epochs[k] > 0) caps[s.sources[k].name] = s.max_epochs[k];
  }
  if (!caps.empty()) root["max_epochs"] = caps;
  return root.dump();
}

Status MixtureScheduleFromYaml(const std::string& path, const YAML::Node& root,
                               std::string* json_text) {
  Json j = Json::object();
  int64_t budget = kMaxScheduleNodes;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar() || !IsMixtureKey(kv.first.Scalar())) continue;
    auto v = ToJson(kv.second, kv.first.Scalar(), &budget);
    if (!v.ok()) return InvalidArgument("config '" + path + "': " + v.status().message());
    j[kv.first.Scalar()] = std::move(v).value();
  }
  if (j.empty()) return Status::Ok();
  auto s = FromJson(j);
  if (!s.ok()) return InvalidArgument("config '" + path + "': " + s.status().message());
  *json_text = MixtureScheduleJson(*s);
  return Status::Ok();
}

}  // namespace gridfeed::config
