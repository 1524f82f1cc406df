// OLMo's training YAML as a gridfeed configuration: detection, the key mapping (with OLMo's
// defaults and precedence), sorted data.datasets labels, ignored keys, errors naming the key.
#include "gridfeed/config/olmo_yaml.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gridfeed/config/flags.h"

namespace gridfeed::config {
namespace {

std::string WriteYaml(const std::string& body) {
  const std::string path = ::testing::TempDir() + "/olmo_yaml_test.yaml";
  std::ofstream(path) << body;
  return path;
}

Result<JobOptions> Load(const std::string& body) {
  JobOptions o;
  GRIDFEED_RETURN_IF_ERROR(ApplyYaml(WriteYaml(body), Groups::All(), &o));
  return o;
}

TEST(OlmoYaml, DetectsOnlyADataMappingWithPathsOrDatasets) {
  EXPECT_TRUE(IsOlmoConfig(YAML::Load("data: {paths: [a.npy]}")));
  EXPECT_TRUE(IsOlmoConfig(YAML::Load("data: {datasets: {x: [a.npy]}}")));
  EXPECT_FALSE(IsOlmoConfig(YAML::Load("data-path: [p]\nseq-length: 8")));
  EXPECT_FALSE(IsOlmoConfig(YAML::Load("data: {memmap_dtype: uint16}")));
}

TEST(OlmoYaml, MapsTheDataKeysWithOlmosDefaults) {
  auto o = Load(
      "run_name: x\nseed: 11\nepoch: 2\nglobal_train_batch_size: 8\n"
      "device_train_microbatch_size: 2\noptimizer: {learning_rate: 0.1}\n"
      "model: {d_model: 64, max_sequence_length: 128, eos_token_id: 7, pad_token_id: 3}\n"
      "data: {paths: [b.npy, a.npy], label_mask_paths: [b.m, a.m], memmap_dtype: uint32,\n"
      "       drop_last: true, num_workers: 3, num_threads: 2, pin_memory: true,\n"
      "       generate_attention_mask: true, instance_filter: {repetition_max_count: 9}}\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const DataOptions& d = o->data;
  EXPECT_EQ(d.olmo_paths, (std::vector<std::string>{"b.npy", "a.npy"}));  // order kept
  EXPECT_TRUE(d.olmo_path_labels.empty());
  EXPECT_EQ(d.olmo_label_mask_paths, (std::vector<std::string>{"b.m", "a.m"}));
  EXPECT_EQ(d.olmo_memmap_dtype, "uint32");
  EXPECT_EQ(d.seed, 11);
  EXPECT_EQ(d.olmo_epoch, 2);
  EXPECT_EQ(d.seq_length, 128);
  EXPECT_EQ(d.eod_id, 7);
  EXPECT_EQ(d.pad_id, 3);
  EXPECT_TRUE(d.olmo_drop_last);
  EXPECT_EQ(d.olmo_num_workers, 3);
  EXPECT_TRUE(d.olmo_generate_attention_mask);
  EXPECT_TRUE(d.olmo_instance_filter);
  EXPECT_EQ(d.olmo_repetition_max_period, 13);
  EXPECT_EQ(d.olmo_repetition_min_period, 1);
  EXPECT_EQ(d.olmo_repetition_max_count, 9);
  EXPECT_EQ(o->batch.global_batch_size, 8);
  EXPECT_EQ(o->batch.micro_batch_size, 2);
  EXPECT_TRUE(Validate(*o).ok());
}

TEST(OlmoYaml, DefaultsAreOlmosAndDataSeedWins) {
  auto o = Load("data: {paths: [a.npy]}\n");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->data.seed, 6198);
  EXPECT_EQ(o->data.seq_length, 1024);
  EXPECT_EQ(o->data.eod_id, 50256);
  EXPECT_EQ(o->batch.global_batch_size, 512);
  EXPECT_EQ(o->batch.micro_batch_size, 16);
  EXPECT_FALSE(o->data.olmo_instance_filter);
  auto p = Load("seed: 5\ndata: {seed: 9, paths: [a.npy]}\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->data.seed, 9);
  auto q = Load("data: {paths: [a.npy], seed: null}\nseed: 5\n");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->data.seed, 5);
}

TEST(OlmoYaml, DatasetLabelsAreSortedAndPathsKeepTheirOrder) {
  auto o = Load("data: {datasets: {web: [w1, w2], code: [c1], books: [b2, b1]}}\n");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->data.olmo_paths, (std::vector<std::string>{"b2", "b1", "c1", "w1", "w2"}));
  EXPECT_EQ(o->data.olmo_path_labels,
            (std::vector<std::string>{"books", "books", "code", "web", "web"}));
}

TEST(OlmoYaml, ErrorsNameTheKey) {
  auto typo = Load("data: {paths: [a.npy], num_wrokers: 2}\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("data.num_wrokers"), std::string::npos);
  auto both = Load("data: {paths: [a.npy], datasets: {x: [b.npy]}}\n");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("mutually exclusive"), std::string::npos);
  auto custom = Load("data: {paths: [a.npy], custom_dataset: {name: x}}\n");
  ASSERT_FALSE(custom.ok());
  EXPECT_NE(custom.status().message().find("data.custom_dataset"), std::string::npos);
  auto type = Load("model: {max_sequence_length: long}\ndata: {paths: [a.npy]}\n");
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("model.max_sequence_length"), std::string::npos);
  auto filter = Load("data: {paths: [a.npy], instance_filter: {max_period: 3}}\n");
  ASSERT_FALSE(filter.ok());
  EXPECT_NE(filter.status().message().find("data.instance_filter.max_period"), std::string::npos);
  auto dtype = Load("data: {paths: [a.npy], memmap_dtype: float32}\n");
  ASSERT_TRUE(dtype.ok());
  Status st = Validate(*dtype);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--olmo-memmap-dtype"), std::string::npos);
}

TEST(OlmoYaml, DeviceBatchSizeIsChecked) {
  auto o = Load(
      "global_train_batch_size: 8\ndevice_train_batch_size: 4\n"
      "device_train_microbatch_size: 2\ndata: {paths: [a.npy]}\n"
      "model: {max_sequence_length: 8}\n");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(ValidateGrid(*o, 2).ok());
  auto wrong = ValidateGrid(*o, 4);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("--device-train-batch-size"), std::string::npos);
}

}  // namespace
}  // namespace gridfeed::config
