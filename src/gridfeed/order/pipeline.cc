#include "gridfeed/order/pipeline.h"

#include "gridfeed/order/megatron_pipeline.h"
#include "gridfeed/order/olmo_pipeline.h"

namespace gridfeed::order {

Result<std::unique_ptr<Pipeline>> Pipeline::For(const config::JobOptions& options) {
  if (options.data.is_olmo()) return MakeOlmoPipeline(options);
  return MakeMegatronPipeline(options.data);
}

}  // namespace gridfeed::order
