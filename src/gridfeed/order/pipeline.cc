#include "gridfeed/order/pipeline.h"

#include "gridfeed/order/megatron_pipeline.h"
#include "gridfeed/order/mixture_pipeline.h"
#include "gridfeed/order/olmo_pipeline.h"

namespace gridfeed::order {

SampleRecord OrderView::ReadFields(Split split, int64_t position, const FieldTargets& out,
                                   bool hash_tokens, AssemblyScratch* scratch) const {
  SampleRecord r = Read(split, position, &scratch->sample, hash_tokens);
  SliceFields(scratch->sample, static_cast<int64_t>(scratch->sample.tokens.size()), out);
  return r;
}

Result<std::unique_ptr<Pipeline>> Pipeline::For(const config::JobOptions& options) {
  if (options.data.is_olmo()) return MakeOlmoPipeline(options);
  if (options.data.is_mixture()) return MakeMixturePipeline(options);
  return MakeMegatronPipeline(options.data);
}

}  // namespace gridfeed::order
