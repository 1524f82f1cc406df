// The feeder's device path (--device-broadcast): TP rank 0 stages the payload, every TP rank of
// a stage that receives data gets it in "device" memory, and those bytes are exactly the host
// path's payload (the same PayloadLayout, unpacked here on the host and compared field by
// field with a run of the host path). Loopback* runs the real feeder code path through the
// host twin (--testing-device-loopback, MPI underneath); Gpu* runs it over CUDA + NCCL and is
// registered under the ctest label gpu (scripts/test-gpu): it fails without a usable GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>

#include "gridfeed/device/probe.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/feed/payload.h"
#include "testing/paths.h"

namespace gridfeed::feed {
namespace {

int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

struct Layout {
  int tp, pp, cp;
  bool mask;
};

FeederOptions OptionsFor(Layout l) {
  FeederOptions o;
  o.data.data_path = {"corpora/corpus_u16"};
  o.data.split = "969,30,1";
  o.data.seq_length = 64;
  o.data.train_samples = "3000";
  o.data.valid_samples = "120";
  o.data.test_samples = "30";
  o.data.create_attention_mask = l.mask;
  o.grid.tensor_model_parallel_size = l.tp;
  o.grid.pipeline_model_parallel_size = l.pp;
  o.grid.context_parallel_size = l.cp;
  o.batch.micro_batch_size = 4;
  o.resume.consumed_samples = 8;
  o.feed.prefetch_depth = 2;
  return o;
}

class DeviceMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(gridfeed::testing::GoldenDir());
  }
  void TearDown() override { std::filesystem::current_path(cwd_); }
  std::filesystem::path cwd_;
};

constexpr int kSteps = 3;

// Host path first, then the device path on the same options; every rank compares what it got.
void ExpectDeviceEqualsHost(FeederOptions o, bool loopback) {
  std::vector<MicroBatch> host;
  {
    auto f = Feeder::Open(o, MPI_COMM_WORLD);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    for (int s = 0; s < kSteps; ++s) {
      auto mb = (*f)->Next();
      ASSERT_TRUE(mb.ok()) << mb.status().ToString();
      EXPECT_EQ(mb->device_payload, nullptr) << "the host path must not fill device_payload";
      host.push_back(std::move(mb).value());
    }
  }
  o.feed.device_broadcast = true;
  o.feed.testing_device_loopback = loopback;
  auto f = Feeder::Open(o, MPI_COMM_WORLD);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto& g = (*f)->grid();
  const bool receives = g.first_stage() || g.last_stage();
  // The layout a trainer would compute from the same options (not the feeder's own object).
  const PayloadLayout layout(order::GptSchema(o.data.create_attention_mask),
                             o.batch.micro_batch_size, o.data.seq_length, g.cp_size(),
                             g.first_stage(), g.last_stage());
  for (int s = 0; s < kSteps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    auto mb = (*f)->Next();
    ASSERT_TRUE(mb.ok()) << mb.status().ToString();
    const MicroBatch& want = host[s];
    EXPECT_EQ(mb->has_inputs, want.has_inputs);
    EXPECT_EQ(mb->has_targets, want.has_targets);
    // The host fields stay empty on the device path (records excepted).
    EXPECT_TRUE(mb->sample_indices.empty() && mb->fields.empty() && mb->payload.empty());
    EXPECT_EQ(mb->records.size(), want.records.size());
    if (!receives) {
      EXPECT_EQ(mb->device_payload, nullptr);
      EXPECT_EQ(mb->device_payload_bytes, 0u);
      continue;
    }
    ASSERT_NE(mb->device_payload, nullptr) << g.Describe();
    ASSERT_EQ(mb->device_payload_bytes, layout.total_bytes);
    auto bytes = (*f)->DevicePayloadToHost(*mb);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    MicroBatch got;
    layout.Unpack(*bytes, &got);
    ASSERT_FALSE(want.sample_indices.empty());
    EXPECT_EQ(got.sample_indices, want.sample_indices);
    EXPECT_TRUE(std::ranges::equal(got.tokens(), want.tokens()));
    EXPECT_TRUE(std::ranges::equal(got.position_ids(), want.position_ids()));
    EXPECT_TRUE(std::ranges::equal(got.labels(), want.labels()));
    EXPECT_TRUE(std::ranges::equal(got.loss_mask(), want.loss_mask()));
    EXPECT_TRUE(std::ranges::equal(got.attention_mask(), want.attention_mask()));
    EXPECT_EQ(got.Digest(), want.Digest());
  }
}

std::vector<Layout> TpLayouts() {
  std::vector<Layout> all = {{2, 1, 1, false}, {2, 1, 1, true}, {2, 2, 1, true}, {2, 1, 2, false}};
  std::vector<Layout> out;
  for (auto l : all) {
    if (WorldSize() % (l.tp * l.pp * l.cp) == 0) out.push_back(l);
  }
  return out;
}

TEST_F(DeviceMpi, LoopbackCarriesTheHostPayload) {
  ASSERT_GE(WorldSize(), 2) << "run at 2 or more ranks (TP 2)";
  for (Layout l : TpLayouts()) {
    SCOPED_TRACE("TP" + std::to_string(l.tp) + " PP" + std::to_string(l.pp) + " CP" +
                 std::to_string(l.cp) + (l.mask ? " mask" : ""));
    ExpectDeviceEqualsHost(OptionsFor(l), /*loopback=*/true);
  }
}

// Real CUDA + NCCL: one GPU per rank (NCCL refuses two ranks of a group on one device).
TEST_F(DeviceMpi, GpuNcclCarriesTheHostPayload) {
  const auto probe = device::Probe();
  ASSERT_TRUE(probe.compiled_with_nccl) << "build with CUDA and NCCL (scripts/test-gpu)";
  ASSERT_GT(probe.device_count, 0) << "no usable GPU: " << probe.cuda_status;
  ASSERT_GE(probe.device_count, WorldSize())
      << WorldSize() << " ranks need " << WorldSize() << " GPUs (scripts/test-gpu runs the 2-rank "
      << "test only where there are 2)";
  const int tp = WorldSize() >= 2 ? 2 : 1;
  ExpectDeviceEqualsHost(OptionsFor({tp, 1, 1, true}), /*loopback=*/false);
}

}  // namespace
}  // namespace gridfeed::feed
