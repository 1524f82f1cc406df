#include "gridfeed/order/registry.h"

#include <array>

#include "gridfeed/order/fim/fim_outputs.h"
#include "gridfeed/order/megatron/megatron_outputs.h"
#include "gridfeed/order/mixture/mixture_pipeline.h"
#include "gridfeed/order/olmo/olmo_outputs.h"
#include "gridfeed/order/sft/sft_outputs.h"

namespace gridfeed::order {

std::span<const PipelineKind* const> PipelineKinds() {
  // Asked in this order: FIM and SFT before the orders their options overlap with; Megatron's
  // last, selecting everything else.
  static const std::array<const PipelineKind*, 5> kKinds = {
      &fim::FimKind(), &sft::SftKind(), &OlmoKind(), &MixtureKind(), &MegatronKind()};
  return kKinds;
}

const PipelineKind& KindOf(const config::DataOptions& data) {
  const auto kinds = PipelineKinds();
  for (const PipelineKind* k : kinds) {
    if (k->selects(data)) return *k;
  }
  return *kinds.back();
}

}  // namespace gridfeed::order
