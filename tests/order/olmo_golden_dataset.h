// The MemMapDataset a golden case describes (a direct MemMapDataset(...) call, a
// build_memmap_dataset(...) call or a train_config), opened with gridfeed, plus the per-path
// metadata OLMo attaches and the items and batches built from it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_collator.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "olmo_golden_util.h"

namespace gridfeed::testing {

struct GoldenDataset {
  std::vector<std::string> paths;        // as OLMo received them (relative to the golden dir)
  std::vector<nlohmann::json> metadata;  // one dict per path
  bool include_instance_metadata = false;
  std::string memmap_dtype = "uint16";
  int64_t chunk_size = 1024;
  order::OlmoItemOptions options;
  io::OlmoTokenFiles files;
};

inline std::optional<order::InstanceFilter> FilterFromJson(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  order::InstanceFilter f;  // "default" (the dataloader cases' shorthand) keeps OLMo's defaults
  if (j.is_object()) {
    f.repetition_max_period = j.value("repetition_max_period", f.repetition_max_period);
    f.repetition_min_period = j.value("repetition_min_period", f.repetition_min_period);
    f.repetition_max_count = j.value("repetition_max_count", f.repetition_max_count);
  }
  return f;
}

inline std::optional<int64_t> OptionalId(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<int64_t>();
}

// Opens the files; `out.files` stays empty (and a failure is added) when that fails.
inline void OpenGoldenDataset(GoldenDataset& d, const std::vector<std::string>& mask_paths) {
  const std::string root = OlmoGoldenDir();
  std::vector<std::string> abs_paths, abs_masks;
  for (const auto& p : d.paths) abs_paths.push_back(root + "/" + p);
  for (const auto& p : mask_paths) abs_masks.push_back(root + "/" + p);
  EXPECT_TRUE(d.memmap_dtype == "uint16" || d.memmap_dtype == "uint32") << d.memmap_dtype;
  auto files = io::OlmoTokenFiles::Open(abs_paths, abs_masks, d.memmap_dtype == "uint32" ? 4 : 2,
                                        d.chunk_size);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  d.files = std::move(*files);
}

// From a model + data config (build_memmap_dataset, build_train_dataloader): data.paths with
// {"path": p}, or data.datasets with labels sorted (code points) and {"label": l}.
inline GoldenDataset DatasetFromConfig(const nlohmann::json& model, const nlohmann::json& data,
                                       bool include_instance_metadata) {
  GoldenDataset d;
  if (data.contains("paths") && !data["paths"].is_null()) {
    for (const auto& p : data["paths"]) {
      d.paths.push_back(p.get<std::string>());
      d.metadata.push_back({{"path", p.get<std::string>()}});
    }
  } else {
    std::map<std::string, std::vector<std::string>> sorted;  // byte order = code point order
    for (const auto& [label, paths] : data.at("datasets").items()) {
      sorted[label] = paths.get<std::vector<std::string>>();
    }
    for (const auto& [label, paths] : sorted) {
      for (const auto& p : paths) {
        d.paths.push_back(p);
        d.metadata.push_back({{"label", label}});
      }
    }
  }
  d.include_instance_metadata = include_instance_metadata;
  d.memmap_dtype = data.value("memmap_dtype", "uint16");
  d.chunk_size = model.at("max_sequence_length").get<int64_t>();
  d.options.pad_token_id = OptionalId(model, "pad_token_id");
  d.options.eos_token_id = OptionalId(model, "eos_token_id");
  d.options.generate_attention_mask = data.value("generate_attention_mask", false);
  d.options.generate_doc_lengths = data.value("generate_doc_lengths", false);
  d.options.instance_filter =
      FilterFromJson(data.contains("instance_filter") ? data["instance_filter"] : nullptr);
  std::vector<std::string> masks;
  if (data.contains("label_mask_paths") && !data["label_mask_paths"].is_null()) {
    masks = data["label_mask_paths"].get<std::vector<std::string>>();
  }
  OpenGoldenDataset(d, masks);
  return d;
}

// From a case's olmo_call.
inline GoldenDataset DatasetFromCall(const nlohmann::json& call) {
  if (call.contains("function")) {
    EXPECT_EQ(call["function"].get<std::string>(), "build_memmap_dataset");
    GoldenDataset d = DatasetFromConfig(call.at("model"), call.at("data_config"),
                                        call.value("include_instance_metadata", false));
    // What OLMo resolved: the sorted paths and their metadata.
    if (call.contains("resulting_paths")) {
      EXPECT_EQ(d.paths, call["resulting_paths"].get<std::vector<std::string>>());
    }
    if (call.contains("resulting_metadata")) {
      EXPECT_EQ(nlohmann::json(d.metadata), call["resulting_metadata"]);
    }
    if (call.contains("resulting_chunk_size")) {
      EXPECT_EQ(d.chunk_size, call["resulting_chunk_size"].get<int64_t>());
    }
    if (call.contains("resulting_memmap_dtype")) {
      EXPECT_EQ(d.memmap_dtype, call["resulting_memmap_dtype"].get<std::string>());
    }
    return d;
  }
  EXPECT_EQ(call.at("class").get<std::string>(), "MemMapDataset");
  GoldenDataset d;
  d.paths = call.at("paths").get<std::vector<std::string>>();
  const nlohmann::json kw = call.value("kwargs", nlohmann::json::object());
  for (const auto& [key, value] : kw.items()) {
    static const std::set<std::string> known = {"chunk_size",
                                                "memmap_dtype",
                                                "metadata",
                                                "include_instance_metadata",
                                                "generate_attention_mask",
                                                "generate_doc_lengths",
                                                "pad_token_id",
                                                "eos_token_id",
                                                "label_mask_paths",
                                                "instance_filter_config"};
    EXPECT_TRUE(known.count(key)) << "unknown MemMapDataset argument '" << key << "'";
  }
  d.chunk_size = kw.value("chunk_size", int64_t{1024});
  d.memmap_dtype = kw.value("memmap_dtype", "uint16");
  d.include_instance_metadata = kw.value("include_instance_metadata", true);
  d.options.pad_token_id = OptionalId(kw, "pad_token_id");
  d.options.eos_token_id = OptionalId(kw, "eos_token_id");
  d.options.generate_attention_mask = kw.value("generate_attention_mask", false);
  d.options.generate_doc_lengths = kw.value("generate_doc_lengths", false);
  d.options.instance_filter = FilterFromJson(
      kw.contains("instance_filter_config") ? kw["instance_filter_config"] : nullptr);
  const nlohmann::json meta = kw.contains("metadata") ? kw["metadata"] : nlohmann::json();
  for (size_t k = 0; k < d.paths.size(); ++k) {
    if (meta.is_array()) {
      d.metadata.push_back(meta.at(k));
    } else {
      d.metadata.push_back(meta.is_null() ? nlohmann::json::object() : meta);
    }
  }
  std::vector<std::string> masks;
  if (kw.contains("label_mask_paths") && !kw["label_mask_paths"].is_null()) {
    masks = kw["label_mask_paths"].get<std::vector<std::string>>();
  }
  OpenGoldenDataset(d, masks);
  return d;
}

// The fields of an item dict in OLMo (with "index" when it came through the iterable).
inline std::set<std::string> ItemFields(const GoldenDataset& d, bool with_index) {
  std::set<std::string> f = {"input_ids"};
  if (d.options.instance_filter) f.insert("instance_mask");
  if (d.files.has_label_masks()) f.insert("label_mask");
  if (d.include_instance_metadata) f.insert("metadata");
  if (d.options.generate_attention_mask) f.insert("attention_mask");
  if (d.options.generate_doc_lengths) f.insert("doc_lens");
  if (with_index) f.insert("index");
  return f;
}

inline order::CollatorItem ToCollatorItem(const order::OlmoItem& item) {
  order::CollatorItem c;
  c.input_ids = item.input_ids;
  if (!item.attention_mask.empty()) c.attention_mask = item.attention_mask;
  if (!item.label_mask.empty()) c.label_mask = item.label_mask;
  if (!item.doc_lens.empty()) c.doc_lens = item.doc_lens;
  c.index = item.index;
  c.instance_mask = item.instance_mask;
  return c;
}

}  // namespace gridfeed::testing
