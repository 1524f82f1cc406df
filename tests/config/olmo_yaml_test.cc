// OLMo's training YAML as a gridfeed configuration: detection, the key mapping (with OLMo's
// defaults and precedence), sorted data.datasets labels, ignored keys, errors naming the key.
#include "gridfeed/config/olmo_yaml.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gridfeed/config/canonical.h"
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
      "       drop_last: true, num_workers: 3, pin_memory: true,\n"
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

// Issue 22.1: OLMo's trainer splits a device batch into chunks of at most
// device_train_microbatch_size (default 16), the last one smaller; it never refuses one.
TEST(OlmoYaml, TheDefaultMicroBatchNeedNotDivideTheDeviceBatch) {
  auto o =
      Load("global_train_batch_size: 8\ndata: {paths: [a.npy]}\nmodel: {max_sequence_length: 8}\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->batch.micro_batch_size, 16);  // OLMo's default, as requested
  EXPECT_TRUE(ValidateGrid(*o, 2).ok());     // device batch 4: one chunk of 4
  auto odd = Load(
      "global_train_batch_size: 40\ndevice_train_microbatch_size: 16\n"
      "data: {paths: [a.npy]}\nmodel: {max_sequence_length: 8}\n");
  ASSERT_TRUE(odd.ok());
  auto dp = ValidateGrid(*odd, 1);  // chunks 16, 16, 8
  EXPECT_TRUE(dp.ok()) << dp.status().ToString();
  // The feeder reads micro-batches of one size that tile OLMo's chunks.
  EXPECT_EQ(FeederMicroBatchSize(*o, 2), 4);
  EXPECT_EQ(FeederMicroBatchSize(*odd, 1), 8);
  EXPECT_EQ(FeederMicroBatchSize(*odd, 2), 4);  // device batch 20: chunks 16, 4
  EXPECT_EQ(OlmoFeederMicroBatch(16, 64), 16);
  EXPECT_EQ(OlmoFeederMicroBatch(16, 17), 1);
  EXPECT_EQ(OlmoFeederMicroBatch(6, 4), 4);
}

// Issue 22.4: a key that is not OLMo's is an error naming it and the nearest valid key.
TEST(OlmoYaml, UnknownKeysAreErrorsWithTheNearestKey) {
  auto top = Load("global_train_batch_sise: 8\ndata: {paths: [a.npy]}\n");
  ASSERT_FALSE(top.ok());
  EXPECT_NE(top.status().message().find("'global_train_batch_sise'"), std::string::npos)
      << top.status().message();
  EXPECT_NE(top.status().message().find("did you mean 'global_train_batch_size'"),
            std::string::npos)
      << top.status().message();
  auto model = Load("model: {max_sequence_lenght: 8}\ndata: {paths: [a.npy]}\n");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("model.max_sequence_lenght"), std::string::npos);
  EXPECT_NE(model.status().message().find("'max_sequence_length'"), std::string::npos)
      << model.status().message();
  // num_threads is an argument of OLMo's IterableDataset, not a key of its DataConfig.
  EXPECT_FALSE(Load("data: {paths: [a.npy], num_threads: 2}\n").ok());
  auto data = Load("data: {paths: [a.npy], num_wrokers: 2}\n");
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("'num_workers'"), std::string::npos)
      << data.status().message();
  auto filter = Load("data: {paths: [a.npy], instance_filter: {repetition_max_cont: 3}}\n");
  ASSERT_FALSE(filter.ok());
  EXPECT_NE(filter.status().message().find("'repetition_max_count'"), std::string::npos)
      << filter.status().message();
  // OLMo's keys that do not affect the data are accepted (and listed as ignored).
  auto fine = Load(
      "run_name: x\nmax_duration: 2e12T\nsave_folder: /tmp/x\noptimizer: {learning_rate: 1}\n"
      "fsdp: {precision: mixed}\nmodel: {d_model: 64, n_layers: 2, rope: true}\n"
      "data: {paths: [a.npy], pin_memory: true, timeout: 0}\n");
  EXPECT_TRUE(fine.ok()) << fine.status().ToString();
}

// Issue 22.13: gridfeed's own keys in an OLMo configuration are errors, not dropped.
TEST(OlmoYaml, GridfeedKeysInAnOlmoConfigAreErrors) {
  for (const char* key :
       {"seq-length: 8", "seq_length: 8", "sources: [{name: a}]", "schedule: [{samples: 4}]",
        "data-path: [p]", "micro-batch-size: 2", "max_epochs: 3"}) {
    SCOPED_TRACE(key);
    auto o = Load(std::string(key) + "\ndata: {paths: [a.npy]}\n");
    ASSERT_FALSE(o.ok());
    const std::string name = std::string(key).substr(0, std::string(key).find(':'));
    EXPECT_NE(o.status().message().find("'" + name + "'"), std::string::npos)
        << o.status().message();
    EXPECT_NE(o.status().message().find("gridfeed"), std::string::npos) << o.status().message();
  }
}

// Issue 22.2: numpy's SeedSequence takes integers of any size; so does gridfeed, and the
// canonical text (fingerprint, ledger, checkpoint) carries the whole seed.
TEST(OlmoYaml, SeedsOfAnySize) {
  const std::string big = "1606938044258990275541962092341162602522202993782792835301376";  // 2^200
  for (const std::string& where : {"seed: " + big + "\ndata: {paths: [a.npy]}\n",
                                   "data: {paths: [a.npy], seed: " + big + "}\n"}) {
    auto o = Load(where);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_TRUE(Validate(*o).ok()) << Validate(*o).ToString();
    const std::string text = CanonicalText(o->data);
    EXPECT_NE(text.find(big), std::string::npos) << text;
    auto back = FromCanonical(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(CanonicalText(*back), text);
  }
  auto a = Load("seed: 79228162514264337593543950336\ndata: {paths: [a.npy]}\n");  // 2^96
  auto b = Load("seed: 79228162514264337593543950337\ndata: {paths: [a.npy]}\n");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(CanonicalText(a->data), CanonicalText(b->data));
  auto small = Load("seed: 42\ndata: {paths: [a.npy]}\n");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->data.seed, 42);
  for (const char* bad :
       {"seed: -1\ndata: {paths: [a.npy]}", "seed: 12a\ndata: {paths: [a.npy]}",
        "seed: 1.5\ndata: {paths: [a.npy]}", "data: {paths: [a.npy], seed: -3}"}) {
    SCOPED_TRACE(bad);
    auto o = Load(bad);
    if (o.ok()) {
      EXPECT_FALSE(Validate(*o).ok());
    } else {
      EXPECT_NE(o.status().message().find("seed"), std::string::npos) << o.status().message();
    }
  }
}

// Issue 22.14: the device batch is checked the same way wherever the DP size is known.
TEST(OlmoYaml, DeviceBatchSizeNeedsTheDpSize) {
  auto o = Load(
      "global_train_batch_size: 8\ndevice_train_batch_size: 4\n"
      "data: {paths: [a.npy]}\nmodel: {max_sequence_length: 8}\n");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(ValidateGrid(*o, 2).ok());
  EXPECT_FALSE(ValidateGrid(*o, 1).ok());
}

}  // namespace
}  // namespace gridfeed::config
