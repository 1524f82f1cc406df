// Placeholder until the real implementation lands: refuses by name.
#include <nlohmann/json.hpp>

#include "gridfeed/text/hf/models.h"

namespace gridfeed::text::hf {

Result<std::unique_ptr<Model>> MakeWordLevelModel(const nlohmann::json&, const JsonWhere& where) {
  return InvalidArgument("MakeWordLevelModel: not implemented yet (" + where.str() + ")");
}

}  // namespace gridfeed::text::hf
