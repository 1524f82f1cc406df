// The registry's rows agree with themselves: each pipeline is chosen by its own options, and
// every offline tool either has a pipeline's function or says why not.
#include "gridfeed/order/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gridfeed::order {
namespace {

TEST(RegistryTest, EveryToolHasItsFunctionOrAReason) {
  std::set<std::string> names;
  for (const PipelineKind* k : PipelineKinds()) {
    SCOPED_TRACE(k->name);
    EXPECT_TRUE(names.insert(k->name).second) << "two kinds named " << k->name;
    ASSERT_NE(k->selects, nullptr);
    ASSERT_NE(k->make, nullptr);
    ASSERT_NE(k->samples, nullptr);
    EXPECT_NE(k->tables == nullptr, k->no_tables == nullptr);
    // bench measures a pipeline against its own floor, or refuses with a reason.
    EXPECT_EQ(k->floor == nullptr, k->table_bytes == nullptr);
    EXPECT_NE(k->floor == nullptr, k->no_bench == nullptr);
    EXPECT_NE(k->plan == nullptr, k->no_plan == nullptr);
  }
}

TEST(RegistryTest, EachPipelineIsChosenByItsOwnOptions) {
  config::DataOptions d;
  EXPECT_STREQ(KindOf(d).name, "megatron");
  d.olmo_paths = {"x.npy"};
  EXPECT_STREQ(KindOf(d).name, "olmo");
  d = {};
  d.mixture_schedule = "stages";
  EXPECT_STREQ(KindOf(d).name, "mixture");
  d = {};
  d.sft = true;
  EXPECT_STREQ(KindOf(d).name, "sft");
  d = {};
  d.fim_data = true;
  EXPECT_STREQ(KindOf(d).name, "fim");
}

}  // namespace
}  // namespace gridfeed::order
