#include <string>

#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf {

JsonWhere JsonWhere::Field(std::string_view name) const {
  return {file, path.empty() ? std::string(name) : path + "." + std::string(name)};
}

JsonWhere JsonWhere::Index(size_t i) const {
  return {file, path + "[" + std::to_string(i) + "]"};
}

std::string JsonWhere::str() const { return path.empty() ? file : file + ": " + path; }

}  // namespace gridfeed::text::hf
