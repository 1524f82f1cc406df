// The payload layout and micro-batch fields follow the pipeline's schema: a schema the feeder
// has never seen (a made-up pipeline's fields) is laid out, unpacked and read back field by
// field, and the counts of variable-length fields are bounded when they come off the wire.
#include "gridfeed/feed/payload.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

#include "gridfeed/feed/feeder.h"

namespace gridfeed::feed {
namespace {

using order::CpSlicing;
using order::DType;
using order::FieldShape;

// A pipeline of its own: document ids on the last stage, per-token weights on both, a
// variable list of boundaries and a scalar, besides tokens.
constexpr order::FieldSpec kNovel[] = {
    {"tokens", DType::kInt64, FieldShape::kSequence, order::kFirstStage, CpSlicing::kZigzag},
    {"doc_ids", DType::kInt32, FieldShape::kSequence, order::kLastStage, CpSlicing::kZigzag},
    {"weights", DType::kFloat32, FieldShape::kSequence, order::kFirstAndLastStages,
     CpSlicing::kZigzag},
    {"bounds", DType::kInt32, FieldShape::kVariable, order::kFirstAndLastStages, CpSlicing::kNone},
    {"longest", DType::kInt32, FieldShape::kScalar, order::kLastStage, CpSlicing::kNone},
};
const order::FieldSchema kSchema{kNovel};

TEST(PayloadLayout, StagesGetTheirFieldsAlignedInSchemaOrder) {
  const PayloadLayout first(kSchema, /*mbs=*/3, /*seq=*/6, /*cp=*/2, true, false);
  ASSERT_EQ(first.slots.size(), 3u);
  EXPECT_STREQ(first.slots[0].spec->name, "tokens");
  EXPECT_STREQ(first.slots[1].spec->name, "weights");
  EXPECT_STREQ(first.slots[2].spec->name, "bounds");
  EXPECT_EQ(first.Find("doc_ids"), nullptr);
  EXPECT_EQ(first.slots[0].shape, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(first.slots[2].capacity, 3 * 6 + 1);
  // The variable field's values come after every fixed field and its count.
  EXPECT_GE(first.slots[2].offset, first.fixed_bytes);
  EXPECT_LT(first.slots[2].count_offset, first.fixed_bytes);
  for (const auto& s : first.slots) EXPECT_EQ(s.offset % 8, 0u) << s.spec->name;

  const PayloadLayout last(kSchema, 3, 6, 2, false, true);
  ASSERT_EQ(last.slots.size(), 4u);
  EXPECT_STREQ(last.slots[0].spec->name, "doc_ids");
  // 3 x 3 int32 = 36 bytes: the next field still starts aligned.
  EXPECT_EQ(last.slots[1].offset % 8, 0u);
  EXPECT_EQ(last.Find("longest")->shape, (std::vector<int64_t>{1}));

  const PayloadLayout middle(kSchema, 3, 6, 2, false, false);
  EXPECT_TRUE(middle.slots.empty());
  EXPECT_EQ(middle.total_bytes, 0u);
}

TEST(PayloadLayout, UnpackHandsOverEachFieldWithoutACopy) {
  const PayloadLayout last(kSchema, 2, 4, 1, false, true);
  std::vector<std::byte> payload(last.total_bytes);
  last.PutHeader(&payload, PayloadLayout::kSamplePositions, 1, 42);
  auto* doc = reinterpret_cast<int32_t*>(payload.data() + last.Find("doc_ids")->offset);
  for (int i = 0; i < 8; ++i) doc[i] = 100 + i;
  const auto* bounds = last.Find("bounds");
  const int64_t count = 3;
  std::memcpy(payload.data() + bounds->count_offset, &count, 8);
  auto* b = reinterpret_cast<int32_t*>(payload.data() + bounds->offset);
  b[0] = 0, b[1] = 5, b[2] = 8;
  const std::byte* where = payload.data();

  MicroBatch mb;
  last.Unpack(std::move(payload), &mb);
  EXPECT_EQ(mb.payload.data(), where);
  EXPECT_TRUE(mb.has_targets && !mb.has_inputs);
  EXPECT_EQ(mb.sample_positions, (std::vector<int64_t>{0, 42}));
  ASSERT_EQ(mb.fields.size(), 4u);
  const auto ids = mb.Values<int32_t>("doc_ids");
  ASSERT_EQ(ids.size(), 8u);
  EXPECT_EQ(ids[7], 107);
  EXPECT_EQ(mb.Find("doc_ids")->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mb.Find("bounds")->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(std::vector<int32_t>(mb.Values<int32_t>("bounds").begin(),
                                 mb.Values<int32_t>("bounds").end()),
            (std::vector<int32_t>{0, 5, 8}));
  EXPECT_TRUE(mb.tokens().empty());  // not this stage's
  EXPECT_THROW(mb.Values<float>("doc_ids"), std::logic_error);
  EXPECT_THROW(mb.Values<int64_t>("doc_ids"), std::logic_error);

  // A copy reads its own payload (fields are offsets, not pointers).
  MicroBatch copy = mb;
  mb.payload.assign(mb.payload.size(), std::byte{0});
  EXPECT_EQ(copy.Values<int32_t>("doc_ids")[7], 107);
  EXPECT_NE(copy.Digest(), mb.Digest());
}

TEST(PayloadLayout, ACountOffTheWireIsBoundedByTheFieldsRoom) {
  const PayloadLayout first(kSchema, 2, 4, 1, true, false);
  std::vector<std::byte> payload(first.total_bytes);
  const auto* bounds = first.Find("bounds");
  for (int64_t forged : {int64_t{-5}, int64_t{1} << 40}) {
    std::memcpy(payload.data() + bounds->count_offset, &forged, 8);
    EXPECT_EQ(first.CountOf(payload, *bounds), forged < 0 ? 0 : bounds->capacity);
    MicroBatch mb;
    first.Unpack(payload, &mb);
    EXPECT_LE(mb.Values<int32_t>("bounds").size(), static_cast<size_t>(bounds->capacity));
  }
}

TEST(PayloadLayout, TheGptAndPackedSchemasKeepGetBatchsNames) {
  const PayloadLayout gpt(order::GptSchema(true), 2, 8, 2, true, true);
  std::vector<std::string> names;
  for (const auto& s : gpt.slots) names.push_back(s.spec->name);
  EXPECT_EQ(names, (std::vector<std::string>{"tokens", "position_ids", "attention_mask", "labels",
                                             "loss_mask"}));
  EXPECT_EQ(gpt.Find("attention_mask")->shape, (std::vector<int64_t>{2, 1, 4, 8}));
  EXPECT_FALSE(gpt.packed);
  const PayloadLayout packed(order::PackedSchema(), 2, 8, 2, true, false);
  EXPECT_TRUE(packed.packed);
  EXPECT_EQ(packed.Find("tokens")->shape, (std::vector<int64_t>{1, 8}));
  EXPECT_NE(packed.Find("cu_seqlens"), nullptr);
  EXPECT_EQ(packed.Find("labels"), nullptr);
}

}  // namespace
}  // namespace gridfeed::feed
