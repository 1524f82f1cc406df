#include "gridfeed/python/kwargs.h"

#include <pybind11/stl.h>

#include <cmath>
#include <type_traits>
#include <variant>
#include <vector>

#include "gridfeed/config/data_args.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/nearest_name.h"

namespace gridfeed::python {
namespace py = pybind11;
namespace {

// The C++ field name where the examples use it (FeederOptions::resume.resume_from).
constexpr const char* kAliases[][2] = {{"resume_from", "resume"}};

const char* GroupName(config::Group g) {
  switch (g) {
    case config::Group::kData:
      return "data";
    case config::Group::kGrid:
      return "grid";
    case config::Group::kBatch:
      return "batch";
    case config::Group::kResume:
      return "resume";
    case config::Group::kFeed:
      return "feed";
    case config::Group::kRun:
      return "run";
    case config::Group::kSplitName:
      return "split-name";
  }
  return "?";
}

std::string TypeName(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

std::string Describe(py::handle value) {
  std::string repr = py::repr(value);
  if (repr.size() > 60) repr = repr.substr(0, 57) + "...";
  return TypeName(value) + " " + repr;
}

bool IsBool(py::handle v) {
  return PyBool_Check(v.ptr()) || TypeName(v) == "bool_";  // numpy.bool_
}

// Text of a path-like or string; false for other types.
bool PathText(py::handle v, std::string* out) {
  if (py::isinstance<py::str>(v)) {
    *out = v.cast<std::string>();
    return true;
  }
  if (py::hasattr(v, "__fspath__")) {
    py::object p = v.attr("__fspath__")();
    if (py::isinstance<py::str>(p)) {
      *out = p.cast<std::string>();
      return true;
    }
  }
  return false;
}

bool IntValue(py::handle v, int64_t* out) {
  if (IsBool(v) || !PyIndex_Check(v.ptr())) return false;
  int overflow = 0;
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {
    PyErr_Clear();
    return false;
  }
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || (n == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = n;
  return true;
}

// One scalar of a list option as the text a flag would carry (numbers in their shortest form).
bool ItemText(py::handle v, std::string* out) {
  if (PathText(v, out)) return true;
  int64_t n = 0;
  if (IntValue(v, &n)) {
    *out = std::to_string(n);
    return true;
  }
  if (!IsBool(v) && PyFloat_Check(v.ptr())) {
    *out = py::repr(v).cast<std::string>();
    return true;
  }
  return false;
}

// Sets one field from a Python value; the error text says what the field needs.
Status SetField(const config::OptionRow& row, py::handle v, config::JobOptions* o) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!IntValue(v, p)) return InvalidArgument("must be an integer (64-bit)");
        } else if constexpr (std::is_same_v<T, double>) {
          int64_t n = 0;
          if (IntValue(v, &n)) {
            *p = static_cast<double>(n);
          } else if (!IsBool(v) && (PyFloat_Check(v.ptr()) || py::hasattr(v, "__float__"))) {
            *p = py::float_(py::reinterpret_borrow<py::object>(v)).cast<double>();
          } else {
            return InvalidArgument("must be a number");
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!IsBool(v)) return InvalidArgument("must be True or False");
          *p = py::bool_(py::reinterpret_borrow<py::object>(v)).cast<bool>();
        } else if constexpr (std::is_same_v<T, std::string>) {
          int64_t n = 0;
          if (PathText(v, p)) return Status::Ok();
          if (!IntValue(v, &n)) return InvalidArgument("must be a string (or an integer)");
          *p = std::to_string(n);
        } else {
          p->clear();
          std::string one;
          if (PathText(v, &one)) {
            p->push_back(one);
            return Status::Ok();
          }
          if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) {
            return InvalidArgument("must be a list of strings or numbers");
          }
          for (py::handle item : v) {
            if (!ItemText(item, &one)) {
              return InvalidArgument("must be a list of strings or numbers, has " + Describe(item));
            }
            p->push_back(one);
          }
        }
        return Status::Ok();
      },
      row.field(*o));
}

py::object ValueOf(const config::OptionRow& row, const config::JobOptions& o) {
  return std::visit(
      [](auto* p) -> py::object {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          py::list l;
          for (const auto& s : *p) l.append(s);
          return l;
        } else {
          return py::cast(*p);
        }
      },
      config::Get(row, o));
}

config::JobOptions& Scratch() {
  static config::JobOptions scratch;  // only its field types are looked at
  return scratch;
}

const char* TypeOf(const config::OptionRow& row) {
  return std::visit(
      [](auto* p) -> const char* {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) return "int";
        if constexpr (std::is_same_v<T, double>) return "float";
        if constexpr (std::is_same_v<T, bool>) return "bool";
        if constexpr (std::is_same_v<T, std::string>) return "str";
        return "list";
      },
      row.field(Scratch()));
}

}  // namespace

std::string KeywordOf(const config::OptionRow& row) {
  std::string k = row.name;
  for (char& c : k) {
    if (c == '-') c = '_';
  }
  return k;
}

Result<config::JobOptions> OptionsFromKwargs(const char* function, const py::kwargs& kwargs,
                                             config::Groups groups) {
  config::JobOptions o;
  const std::string fn = function;
  if (kwargs.contains("config") && !kwargs["config"].is_none()) {
    std::string path;
    if (!PathText(kwargs["config"], &path)) {
      return InvalidArgument(fn + ": keyword 'config' must be a path, got " +
                             Describe(kwargs["config"]));
    }
    GRIDFEED_RETURN_IF_ERROR(config::ApplyYaml(path, groups, &o));
  }
  for (auto [key_handle, value] : kwargs) {
    std::string key = py::str(key_handle);
    if (key == "config") continue;
    for (const auto& alias : kAliases) {
      if (key == alias[0]) key = alias[1];
    }
    std::string name = key;
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    const config::OptionRow* row = config::FindRow(name);
    if (row == nullptr) {
      std::vector<std::string> known;  // this function's keywords, as Python spells them
      for (const config::OptionRow& r : config::OptionTable()) {
        if (!groups.Has(r.group)) continue;
        std::string k = r.name;
        for (char& c : k) {
          if (c == '-') c = '_';
        }
        known.push_back(std::move(k));
      }
      const std::string given = py::str(key_handle);
      return InvalidArgument(fn + ": unknown keyword '" + given + "'" + DidYouMean(given, known) +
                             " (gridfeed.option_table() lists the options)");
    }
    if (!groups.Has(row->group)) {
      return InvalidArgument(fn + ": keyword '" + key + "' (" + row->flag() +
                             ") is not an option of " + fn);
    }
    if (value.is_none()) continue;
    Status st = SetField(*row, value, &o);
    if (!st.ok()) {
      return InvalidArgument(fn + ": keyword '" + key + "' (" + row->flag() + ") " + st.message() +
                             ", got " + Describe(value));
    }
  }
  // data_args_path and the like name files of data lists: read here as for the command line.
  Status loaded = config::LoadDataArgFiles(&o);
  if (!loaded.ok()) return InvalidArgument(fn + ": " + loaded.message());
  config::DeriveOptions(&o);
  return o;
}

py::dict OptionsDict(const config::JobOptions& o, config::Groups groups) {
  py::dict d;
  for (const auto& row : config::OptionTable()) {
    if (groups.Has(row.group)) d[py::str(KeywordOf(row))] = ValueOf(row, o);
  }
  return d;
}

py::list OptionTableList() {
  const config::JobOptions defaults;
  py::list rows;
  for (const auto& row : config::OptionTable()) {
    py::dict r;
    r["keyword"] = KeywordOf(row);
    r["flag"] = row.flag();
    r["type"] = TypeOf(row);
    r["default"] = ValueOf(row, defaults);
    r["group"] = GroupName(row.group);
    r["help"] = row.help;
    r["choices"] = py::cast(row.choices);
    r["decides_order"] = row.canonical != config::Canonical::kNo;
    r["hidden"] = row.hidden;
    rows.append(r);
  }
  return rows;
}

}  // namespace gridfeed::python
