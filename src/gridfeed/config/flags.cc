#include "gridfeed/config/flags.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gridfeed/config/data_args.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/config/olmo_yaml.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/nearest_name.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::config {
namespace {

bool InGroups(const OptionRow& row, Groups groups) { return groups.Has(row.group); }

Result<double> ParseDouble(const std::string& s) {
  if (s.empty()) return InvalidArgument("not a number");
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE) return InvalidArgument("not a number");
  return v;
}

// One YAML value into one field.
Status SetFromYaml(const OptionRow& row, const YAML::Node& v, JobOptions* o) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          p->clear();
          if (v.IsScalar()) {
            p->push_back(v.Scalar());
            return Status::Ok();
          }
          if (!v.IsSequence()) return InvalidArgument("must be a list of scalars");
          for (const auto& item : v) {
            if (!item.IsScalar()) return InvalidArgument("must be a flat list of scalars");
            p->push_back(item.Scalar());
          }
          return Status::Ok();
        } else {
          if (!v.IsScalar()) return InvalidArgument("must be a single value");
          const std::string s = v.Scalar();
          if constexpr (std::is_same_v<T, bool>) {
            if (s == "true" || s == "True") {
              *p = true;
            } else if (s == "false" || s == "False") {
              *p = false;
            } else {
              return InvalidArgument("must be true or false, got '" + s + "'");
            }
          } else if constexpr (std::is_same_v<T, double>) {
            auto d = ParseDouble(s);
            if (!d.ok()) return InvalidArgument("must be a number, got '" + s + "'");
            *p = *d;
          } else if constexpr (std::is_same_v<T, int64_t>) {
            const auto n = ParseInt64(s);
            if (!n) return InvalidArgument("must be an integer, got '" + s + "'");
            *p = *n;
          } else {
            *p = s;
          }
          return Status::Ok();
        }
      },
      row.field(*o));
}

// A YAML file's node graph may share nodes (aliases), so walking it can visit far more nodes
// than the text holds: `a: &a [x, x, ...]`, `b: &b [*a, *a, ...]`, ... multiplies the work with
// each line. Every reader of a config walks it, so it is bounded once, before any walk.
constexpr int64_t kMaxYamlNodes = int64_t{1} << 20;
constexpr int kMaxYamlDepth = 64;

// Whether walking `n` visits at most *budget nodes (decremented) nested at most kMaxYamlDepth.
bool WithinBudget(const YAML::Node& n, int depth, int64_t* budget) {
  if (--*budget < 0 || depth > kMaxYamlDepth) return false;
  if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!WithinBudget(item, depth + 1, budget)) return false;
    }
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!WithinBudget(kv.first, depth + 1, budget) ||
          !WithinBudget(kv.second, depth + 1, budget)) {
        return false;
      }
    }
  }
  return true;
}

// The keys a gridfeed YAML may hold for `groups` (the rows' names, the schedule's keys).
std::vector<std::string> YamlKeys(Groups groups) {
  std::vector<std::string> keys;
  for (const auto& row : OptionTable()) {
    if (InGroups(row, groups)) keys.push_back(row.name);
  }
  if (groups.Has(Group::kData)) {
    for (const char* k : {"sources", "schedule", "max_epochs"}) keys.push_back(k);
  }
  return keys;
}

// The long option names of `app` and of the parsed subcommands below it, with their dashes.
void OptionNames(const CLI::App& app, std::vector<std::string>* names) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names->push_back("--" + l);
  }
  for (const CLI::App* sub : app.get_subcommands()) OptionNames(*sub, names);
}

}  // namespace

std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) return e.what();
  // The command the arguments were given to: the deepest parsed subcommand.
  const CLI::App* cmd = &app;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  std::vector<std::string> names;
  OptionNames(app, &names);
  std::string unknown;
  for (const std::string& arg : app.remaining(true)) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string flag = arg.substr(0, arg.find('='));
    const std::string hint = DidYouMean(flag, names);
    unknown += (unknown.empty() ? "" : ", ") + std::string("'") + flag + "'" + hint;
  }
  if (unknown.empty()) return e.what();
  const std::string where = cmd->get_name();
  return (where.empty() ? std::string() : where + ": ") + "unknown option " + unknown +
         " (see --help)";
}

int ExitOnParseError(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) {
    return app.exit(e);
  }
  std::fprintf(stderr, "%s\n", DescribeParseError(app, e).c_str());
  return e.get_exit_code();
}

Status ApplyYaml(const std::string& path, Groups groups, JobOptions* o) {
  // Read first (a FIFO or directory is refused without blocking), then parse.
  auto text = io::ReadFileToString(path);
  if (!text.ok()) return text.status().WithContext("config file");
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const std::exception& e) {
    return InvalidArgument("cannot parse YAML '" + path + "': " + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument("config '" + path + "' is not a mapping of options");
  int64_t budget = kMaxYamlNodes;
  if (!WithinBudget(root, 0, &budget)) {
    return InvalidArgument("config '" + path + "' expands to more than " +
                           std::to_string(kMaxYamlNodes) + " YAML nodes or nests deeper than " +
                           std::to_string(kMaxYamlDepth) +
                           " levels (aliases of aliases?); refusing to read it");
  }
  if (IsOlmoConfig(root)) {
    std::vector<std::string> ignored;
    GRIDFEED_RETURN_IF_ERROR(ApplyOlmoYaml(path, root, o, &ignored));
    if (!ignored.empty()) {
      std::string line = "OLMo config '" + path + "': keys that do not affect the data, ignored:";
      for (const auto& k : ignored) line += " " + k;
      log::Info(line);
    }
    return Status::Ok();
  }
  if (groups.Has(Group::kData)) {
    GRIDFEED_RETURN_IF_ERROR(MixtureScheduleFromYaml(path, root, &o->data.mixture_schedule));
  }
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) return InvalidArgument("config '" + path + "': a key is not a name");
    const std::string key = kv.first.Scalar();
    if (groups.Has(Group::kData) && IsMixtureKey(key)) continue;  // read above
    const OptionRow* row = FindRow(key);
    if (row == nullptr || !InGroups(*row, groups)) {
      return InvalidArgument(
          "config '" + path + "': unknown key '" + key + "'" +
          (row ? " (not an option of this command)" : DidYouMean(key, YamlKeys(groups))));
    }
    if (kv.second.IsNull()) continue;
    Status st = SetFromYaml(*row, kv.second, o);
    if (!st.ok()) {
      return InvalidArgument("config '" + path + "': key '" + key + "' " + st.message());
    }
  }
  return Status::Ok();
}

OptionFlags::OptionFlags(CLI::App* app, Groups groups) : groups_(groups) {
  app->add_option("--config", config_path_, "YAML file of the same options (flags override)");
  const JobOptions defaults;
  for (const auto& row : OptionTable()) {
    if (!InGroups(row, groups)) continue;
    std::string help = row.help;
    const std::string def = ValueText(row, defaults);
    CLI::Option* opt = std::visit(
        [&](auto* p) -> CLI::Option* {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            return app->add_flag(row.flag(), *p, help);
          } else {
            if (!def.empty() && def != "0" && def != "-1") help += " [default: " + def + "]";
            CLI::Option* o = app->add_option(row.flag(), *p, help);
            // A scalar given twice takes the last value (wrappers append overrides).
            if constexpr (!std::is_same_v<T, std::vector<std::string>>) {
              o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
            }
            return o;
          }
        },
        row.field(*cli_));
    if (row.hidden) opt->group("");
    options_.emplace_back(&row, opt);
  }
}

Result<JobOptions> OptionFlags::ResolveUnchecked() const {
  JobOptions o;
  if (!config_path_.empty()) GRIDFEED_RETURN_IF_ERROR(ApplyYaml(config_path_, groups_, &o));
  for (const auto& [row, option] : options_) {
    if (option->count() > 0) CopyField(*row, *cli_, &o);
  }
  return o;
}

Result<JobOptions> OptionFlags::Resolve() const {
  GRIDFEED_ASSIGN_OR_RETURN(JobOptions o, ResolveUnchecked());
  GRIDFEED_RETURN_IF_ERROR(LoadDataArgFiles(&o));
  DeriveOptions(&o);
  GRIDFEED_RETURN_IF_ERROR(Validate(o));
  return o;
}

}  // namespace gridfeed::config
