// Megatron-Core's GPT data order as a Pipeline (order/pipeline.h): the options' Megatron flags
// -> BlendedMegatronDatasetBuilder's tables (dataset_builder.h) -> a table image
// (table_image.h) -> samples as GPTDataset.__getitem__ assembles them (sample.h), located
// through the one table view (table_view.h). Thread safe where pipeline.h says so.
#pragma once

#include <memory>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/sample.h"

namespace gridfeed::order {

std::unique_ptr<Pipeline> MakeMegatronPipeline(const config::DataOptions& options);

// The builder's configuration for these options. InvalidArgument names the flag.
Result<DatasetConfig> MegatronDatasetConfig(const config::DataOptions& o);
// How samples are assembled (the pad id after Megatron's pad/EOD collision rule).
SampleOptions MegatronSampleOptions(const config::DataOptions& o);
// The built order and the image view of Megatron-format tables (also the scheduled mixture's,
// order/mixture/mixture_pipeline.h, whose tables are Megatron's with another blend).
std::unique_ptr<BuiltOrder> MakeMegatronBuilt(BuiltDatasets built, SampleOptions sample_options);
Result<std::unique_ptr<OrderView>> ViewMegatronImage(std::span<const std::byte> image,
                                                     SampleOptions sample_options);
// The L + 1 token window of `position` (GatherWindow: what GPTFIMDataset rearranges) and its
// record (token_xxh3 0), from a view ViewMegatronImage or MakeMegatronBuilt made (checked).
// REQUIRES: its token stores open.
SampleRecord MegatronWindow(const OrderView& view, Split split, int64_t position,
                            std::vector<int64_t>* window);
// Builds every table (logs warnings, and phase times at DEBUG): what `gridfeed tables` writes out.
// `digest_indexes`: the stores' index digests are computed during the build (DatasetConfig),
// for a build whose DataFacts() will be asked for.
// `on_mid_built`, `on_table_final`: DatasetConfig's, for a writer of the tables; `builds_store`:
// DatasetConfig's, for one producer's share.
Result<BuiltDatasets> BuildMegatronDatasets(
    const config::DataOptions& o, bool digest_indexes = false,
    decltype(DatasetConfig::on_mid_built) on_mid_built = {},
    decltype(DatasetConfig::on_table_final) on_table_final = {},
    decltype(DatasetConfig::builds_store) builds_store = {});

}  // namespace gridfeed::order
