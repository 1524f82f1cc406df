// OLMo's instances against the golden vectors: token files, offsets and items (memmap), the
// repetition filter (filter), document lengths (doclens) and DataCollator (collator); also
// the corpora's sha256. Every case of these kinds in index.json is walked.
#include <gtest/gtest.h>

#include <set>

#include "gridfeed/io/file_util.h"
#include "olmo_golden_dataset.h"
#include "testing/sha256.h"

namespace gridfeed::order {
namespace {

using nlohmann::json;
using testing::ExpectNpy;
using testing::ExpectSameValues;
using testing::GoldenDataset;
using testing::OlmoCasesOfKind;

void ExpectOnlyKeys(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    EXPECT_TRUE(known.count(key)) << where << ": unknown field '" << key << "'";
  }
}

// ---- corpora ---------------------------------------------------------------------------

TEST(OlmoGolden, CorporaSha256) {
  const std::string dir = testing::OlmoGoldenDir() + "/corpora";
  const json corpora = testing::ReadOlmoJson(dir + "/corpora.json");
  int files = 0;
  for (const auto& [name, corpus] : corpora.items()) {
    for (const auto& f : corpus.at("files")) {
      for (const auto& [path_key, sha_key] :
           {std::pair<const char*, const char*>{"path", "sha256"},
            std::pair<const char*, const char*>{"label_mask_path", "label_mask_sha256"}}) {
        if (!f.contains(path_key) || f[path_key].is_null()) continue;
        const std::string path = dir + "/" + f[path_key].get<std::string>();
        auto bytes = io::ReadFileToString(path);
        ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
        EXPECT_EQ(testing::Sha256Hex(std::as_bytes(std::span(*bytes))),
                  f.at(sha_key).get<std::string>())
            << path;
        ++files;
      }
      // Token counts at the corpus dtype.
      const int size = corpus.at("spec").at("dtype").get<std::string>() == "uint32" ? 4 : 2;
      EXPECT_EQ(f.at("bytes").get<int64_t>(), f.at("tokens").get<int64_t>() * size);
    }
  }
  EXPECT_GT(files, 0);
}

// ---- memmap ----------------------------------------------------------------------------

void CheckItems(const GoldenDataset& d, const json& items, const std::string& dir) {
  const auto indices = items.at("item_indices").get<std::vector<int64_t>>();
  const int64_t k = static_cast<int64_t>(indices.size());
  const int64_t chunk = d.chunk_size;
  std::vector<int64_t> input_ids, attention_mask, doc_offsets{0};
  std::vector<uint8_t> label_mask, instance_mask;
  std::vector<int32_t> doc_lens;
  json metadata = json::array();
  for (int64_t i : indices) {
    auto item = GetOlmoItem(d.files, i, d.options);
    ASSERT_TRUE(item.ok()) << item.status().ToString();
    input_ids.insert(input_ids.end(), item->input_ids.begin(), item->input_ids.end());
    attention_mask.insert(attention_mask.end(), item->attention_mask.begin(),
                          item->attention_mask.end());
    label_mask.insert(label_mask.end(), item->label_mask.begin(), item->label_mask.end());
    if (item->instance_mask) instance_mask.push_back(*item->instance_mask ? 1 : 0);
    doc_lens.insert(doc_lens.end(), item->doc_lens.begin(), item->doc_lens.end());
    doc_offsets.push_back(static_cast<int64_t>(doc_lens.size()));
    metadata.push_back(d.metadata[static_cast<size_t>(d.files.FileOf(item->index))]);
  }
  const std::set<std::string> fields = testing::ItemFields(d, false);
  EXPECT_EQ(fields, items.at("fields").get<std::set<std::string>>());
  ExpectNpy(dir + "/items/input_ids.npy", input_ids, {k, chunk});
  EXPECT_EQ(items.value("input_ids_dtype_in_olmo", ""), "torch.int64");
  if (fields.count("label_mask")) {
    ExpectNpy(dir + "/items/label_mask.npy", label_mask, {k, chunk});
    EXPECT_EQ(items.value("label_mask_dtype_in_olmo", ""), "torch.bool");
  }
  if (fields.count("attention_mask")) {
    ExpectNpy(dir + "/items/attention_mask.npy", attention_mask, {k, chunk});
    EXPECT_EQ(items.value("attention_mask_dtype_in_olmo", ""), "torch.int64");
  }
  if (fields.count("doc_lens")) {
    ExpectNpy(dir + "/items/doc_lens_flat.npy", doc_lens, {static_cast<int64_t>(doc_lens.size())});
    ExpectNpy(dir + "/items/doc_lens_offsets.npy", doc_offsets, {k + 1});
    EXPECT_EQ(items.value("doc_lens_dtype_in_olmo", ""), "torch.int32");
  }
  if (fields.count("instance_mask")) {
    ExpectNpy(dir + "/items/instance_mask.npy", instance_mask, {k});
    EXPECT_EQ(items.value("instance_mask_type_in_olmo", ""), "bool");
  }
  if (fields.count("metadata")) {
    EXPECT_EQ(metadata, items.at("metadata"));
  }
  // Files present are exactly the fields OLMo produced.
  for (const char* name : {"label_mask", "attention_mask", "instance_mask"}) {
    EXPECT_EQ(std::filesystem::exists(dir + "/items/" + name + ".npy"), fields.count(name) > 0)
        << name;
  }
}

void CheckAllInstances(const GoldenDataset& d, const json& all, const std::string& dir) {
  ASSERT_TRUE(d.options.instance_filter.has_value());
  const InstanceFilter& f = *d.options.instance_filter;
  std::vector<uint8_t> mask;
  std::map<int64_t, std::vector<PeriodicRun>> reported;
  std::vector<int64_t> x(static_cast<size_t>(d.chunk_size));
  for (int64_t i = 0; i < d.files.size(); ++i) {
    d.files.ReadInstance(i, x);
    mask.push_back(InstanceOk(x, f) ? 1 : 0);
    auto runs = FindPeriodicSequences(x, f.repetition_max_period, f.repetition_min_period);
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    if (!runs->empty()) reported[i] = *runs;
  }
  ExpectNpy(dir + "/" + all.at("instance_mask_file").get<std::string>(), mask, {d.files.size()});
  int64_t masked_out = 0;
  for (uint8_t m : mask) masked_out += m == 0;
  EXPECT_EQ(masked_out, all.at("n_masked_out").get<int64_t>());
  std::map<int64_t, std::vector<PeriodicRun>> want;
  for (const auto& e : all.at("periodic_sequences")) {
    for (const auto& s : e.at("sequences")) {
      PeriodicRun r;
      r.start = s.at(0).get<int64_t>();
      r.end = s.at(1).get<int64_t>();
      r.period = s.at(2).get<int64_t>();
      r.times = s.at(3).get<int64_t>();
      want[e.at("index").get<int64_t>()].push_back(r);
      testing::OlmoValuesChecked() += 4;
    }
  }
  EXPECT_TRUE(want == reported) << "periodic sequences differ (" << want.size() << " vs "
                                << reported.size() << " instances)";
}

TEST(OlmoGolden, MemMap) {
  const auto cases = OlmoCasesOfKind("memmap");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& j = c.json;
    ExpectOnlyKeys(
        j,
        {"kind", "name", "description", "olmo_call", "memmap_dtype", "chunk_size", "len", "offsets",
         "files", "items", "item_source_derived", "index_errors", "all_instances"},
        c.dir);
    const GoldenDataset d = testing::DatasetFromCall(j.at("olmo_call"));
    ASSERT_EQ(d.files.files().size(), d.paths.size()) << "not opened";
    EXPECT_EQ(d.memmap_dtype, j.at("memmap_dtype").get<std::string>());
    EXPECT_EQ(d.chunk_size, j.at("chunk_size").get<int64_t>());
    EXPECT_EQ(d.files.size(), j.at("len").get<int64_t>());
    const auto& facts = d.files.files();
    const auto& offsets = j.at("offsets");
    const auto& files = j.at("files");
    ASSERT_EQ(offsets.size(), facts.size());
    ASSERT_EQ(files.size(), facts.size());
    for (size_t k = 0; k < facts.size(); ++k) {
      ExpectSameValues(offsets[k].get<std::vector<int64_t>>(),
                       std::vector<int64_t>{facts[k].start, facts[k].start + facts[k].instances},
                       "offsets");
      EXPECT_EQ(files[k].at("path").get<std::string>(), d.paths[k]);
      ExpectSameValues(std::vector<int64_t>{files[k].at("bytes").get<int64_t>(),
                                            files[k].at("tokens").get<int64_t>(),
                                            files[k].at("instances").get<int64_t>(),
                                            files[k].at("dropped_tail_tokens").get<int64_t>()},
                       std::vector<int64_t>{facts[k].bytes, facts[k].tokens, facts[k].instances,
                                            facts[k].dropped_tail_tokens},
                       "file facts");
    }
    // Stat agrees with Open.
    {
      std::vector<std::string> abs;
      for (const auto& p : d.paths) abs.push_back(testing::OlmoGoldenDir() + "/" + p);
      auto stat = io::OlmoTokenFiles::Stat(abs, {}, d.files.token_size(), d.chunk_size);
      ASSERT_TRUE(stat.ok()) << stat.status().ToString();
      ASSERT_EQ(stat->size(), facts.size());
      for (size_t k = 0; k < facts.size(); ++k) EXPECT_EQ((*stat)[k].start, facts[k].start);
    }
    CheckItems(d, j.at("items"), c.dir);
    const auto indices = j.at("items").at("item_indices").get<std::vector<int64_t>>();
    const auto& sources = j.at("item_source_derived");
    ASSERT_EQ(sources.size(), indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i] < 0 ? d.files.size() + indices[i] : indices[i];
      const int file = d.files.FileOf(index);
      EXPECT_EQ(file, sources[i].at("file_index").get<int>());
      EXPECT_EQ(index - facts[file].start, sources[i].at("local_index").get<int64_t>());
    }
    // OLMo's IndexError is gridfeed's OutOfRange with the same message.
    for (const auto& e : j.at("index_errors")) {
      auto item = GetOlmoItem(d.files, e.at("index").get<int64_t>(), d.options);
      ASSERT_FALSE(item.ok());
      EXPECT_EQ(item.status().code(), StatusCode::kOutOfRange);
      EXPECT_EQ("IndexError: " + item.status().message(), e.at("error").get<std::string>());
    }
    if (j.contains("all_instances")) CheckAllInstances(d, j["all_instances"], c.dir);
  }
  testing::PrintOlmoCounts("memmap", static_cast<int>(cases.size()));
}

// ---- filter ----------------------------------------------------------------------------

// OLMo's helpers of its reshape-based search, which gridfeed's linear scan does without; the
// recorded results pin down what they mean.
int64_t EndFirstConsecutiveTrue(const std::vector<int64_t>& a) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(a.size()) && a[n] != 0) ++n;
  return n;
}
int64_t StartLastConsecutiveTrue(const std::vector<int64_t>& a) {
  int64_t i = static_cast<int64_t>(a.size());
  while (i > 0 && a[i - 1] != 0) --i;
  return i == static_cast<int64_t>(a.size()) ? -1 : i;
}
std::vector<std::vector<int64_t>> GroupConsecutive(const std::vector<int64_t>& a) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 0 || a[i] != a[i - 1] + 1) out.emplace_back();
    out.back().push_back(a[i]);
  }
  return out;
}

TEST(OlmoGolden, Filter) {
  const auto cases = OlmoCasesOfKind("filter");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& j = c.json;
    ExpectOnlyKeys(j,
                   {"kind", "name", "description", "filter_config", "olmo_call", "arrays_file",
                    "entries", "helper_units"},
                   c.dir);
    const auto filter = testing::FilterFromJson(j.at("filter_config"));
    ASSERT_TRUE(filter.has_value());
    auto arrays = io::ReadNpy(c.dir + "/" + j.at("arrays_file").get<std::string>());
    ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
    ASSERT_TRUE(arrays->Is<int64_t>());
    const std::vector<int64_t> all = arrays->As<int64_t>();
    for (const auto& e : j.at("entries")) {
      ExpectOnlyKeys(e, {"label", "offset", "length", "sequences", "instance_ok", "error"}, c.dir);
      SCOPED_TRACE(e.value("label", ""));
      const std::span<const int64_t> x(all.data() + e.at("offset").get<int64_t>(),
                                       e.at("length").get<size_t>());
      auto runs =
          FindPeriodicSequences(x, filter->repetition_max_period, filter->repetition_min_period);
      if (e.contains("error") && !e["error"].is_null()) {
        EXPECT_FALSE(runs.ok()) << "OLMo: " << e["error"].get<std::string>();
        continue;
      }
      ASSERT_TRUE(runs.ok()) << runs.status().ToString();
      std::vector<int64_t> want, got;
      for (const auto& s : e.at("sequences")) {
        for (const auto& v : s) want.push_back(v.get<int64_t>());
      }
      for (const auto& r : *runs) got.insert(got.end(), {r.start, r.end, r.period, r.times});
      ExpectSameValues(want, got, "sequences");
      EXPECT_EQ(InstanceOk(x, *filter), e.at("instance_ok").get<bool>());
      testing::OlmoValuesChecked() += 1;
    }
    if (j.contains("helper_units")) {
      const json& h = j["helper_units"];
      ExpectOnlyKeys(h,
                     {"find_end_first_consecutive_true", "find_start_last_consecutive_true",
                      "group_consecutive_values"},
                     c.dir);
      for (const auto& u : h.value("find_end_first_consecutive_true", json::array())) {
        EXPECT_EQ(EndFirstConsecutiveTrue(u.at("arr")), u.at("result").get<int64_t>());
      }
      for (const auto& u : h.value("find_start_last_consecutive_true", json::array())) {
        EXPECT_EQ(StartLastConsecutiveTrue(u.at("arr")), u.at("result").get<int64_t>());
      }
      for (const auto& u : h.value("group_consecutive_values", json::array())) {
        EXPECT_EQ(GroupConsecutive(u.at("arr")),
                  u.at("result").get<std::vector<std::vector<int64_t>>>());
      }
    }
  }
  testing::PrintOlmoCounts("filter", static_cast<int>(cases.size()));
}

// ---- doclens ---------------------------------------------------------------------------

TEST(OlmoGolden, DocLens) {
  const auto cases = OlmoCasesOfKind("doclens");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& j = c.json;
    ExpectOnlyKeys(
        j, {"kind", "name", "description", "olmo_call", "arrays_file", "doc_lens_file", "entries"},
        c.dir);
    auto arrays = io::ReadNpy(c.dir + "/" + j.at("arrays_file").get<std::string>());
    ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
    ASSERT_TRUE(arrays->Is<int64_t>());
    const std::vector<int64_t> all = arrays->As<int64_t>();
    std::vector<int32_t> out_all;
    for (const auto& e : j.at("entries")) {
      ExpectOnlyKeys(e,
                     {"label", "eos", "offset", "length", "out_offset", "out_length", "out_dtype",
                      "doc_lens", "error"},
                     c.dir);
      SCOPED_TRACE(e.value("label", ""));
      const std::span<const int64_t> x(all.data() + e.at("offset").get<int64_t>(),
                                       e.at("length").get<size_t>());
      auto lens = DocumentLengths(x, e.at("eos").get<int64_t>());
      if (e.contains("error") && !e["error"].is_null()) {
        EXPECT_FALSE(lens.ok()) << "OLMo: " << e["error"].get<std::string>();
        continue;
      }
      ASSERT_TRUE(lens.ok()) << lens.status().ToString();
      EXPECT_EQ(e.at("out_dtype").get<std::string>(), "torch.int32");
      EXPECT_EQ(e.at("out_offset").get<int64_t>(), static_cast<int64_t>(out_all.size()));
      EXPECT_EQ(e.at("out_length").get<int64_t>(), static_cast<int64_t>(lens->size()));
      ExpectSameValues(e.at("doc_lens").get<std::vector<int64_t>>(), *lens, "doc_lens");
      out_all.insert(out_all.end(), lens->begin(), lens->end());
    }
    ExpectNpy(c.dir + "/" + j.at("doc_lens_file").get<std::string>(), out_all,
              {static_cast<int64_t>(out_all.size())});
  }
  testing::PrintOlmoCounts("doclens", static_cast<int>(cases.size()));
}

// ---- collator --------------------------------------------------------------------------

CollatorItem CollatorItemFromJson(const json& j, json& metadata) {
  CollatorItem item;
  item.input_ids = j.at("input_ids").get<std::vector<int64_t>>();
  if (j.contains("raw")) return item;  // a bare list or tensor of ids
  if (j.contains("attention_mask")) {
    item.attention_mask = j["attention_mask"].get<std::vector<int64_t>>();
  }
  if (j.contains("label_mask")) {
    std::vector<uint8_t> m;
    for (const auto& b : j["label_mask"]) m.push_back(b.get<bool>() ? 1 : 0);
    item.label_mask = m;
  }
  if (j.contains("doc_lens")) item.doc_lens = j["doc_lens"].get<std::vector<int32_t>>();
  if (j.contains("index")) item.index = j["index"].get<int64_t>();
  if (j.contains("instance_mask")) item.instance_mask = j["instance_mask"].get<bool>();
  if (j.contains("attention_bias")) {
    const json& b = j["attention_bias"];
    item.attention_bias_is_bool = b.at("dtype").get<std::string>() == "bool";
    std::vector<double> v;
    for (const auto& row : b.at("values")) {
      for (const auto& x : row)
        v.push_back(x.is_boolean() ? (x.get<bool>() ? 1.0 : 0.0) : x.get<double>());
    }
    item.attention_bias = v;
  }
  if (j.contains("metadata")) metadata.push_back(j["metadata"]);
  return item;
}

TEST(OlmoGolden, Collator) {
  const auto cases = OlmoCasesOfKind("collator");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOnlyKeys(c.json, {"kind", "name", "description", "olmo_call", "entries"}, c.dir);
    for (const auto& e : c.json.at("entries")) {
      SCOPED_TRACE(e.value("label", ""));
      ExpectOnlyKeys(e, {"label", "pad_direction", "pad_token_id", "items", "dir", "outputs"},
                     c.dir);
      std::vector<CollatorItem> items;
      json metadata = json::array();
      for (const auto& it : e.at("items")) items.push_back(CollatorItemFromJson(it, metadata));
      const std::string direction = e.at("pad_direction").get<std::string>();
      ASSERT_TRUE(direction == "right" || direction == "left") << direction;
      const CollatedBatch out =
          Collate(items, direction == "left" ? PadDirection::kLeft : PadDirection::kRight,
                  e.at("pad_token_id").get<int64_t>());
      const std::string dir = c.dir + "/" + e.at("dir").get<std::string>();
      const json& outputs = e.at("outputs");
      std::set<std::string> produced = {"input_ids"};
      const int64_t m = out.max_len;
      auto file = [&](const char* key) {
        return dir + "/" + outputs.at(key).at("file").get<std::string>();
      };
      auto dtype = [&](const char* key) {
        return outputs.at(key).at("dtype_in_olmo").get<std::string>();
      };
      ExpectNpy(file("input_ids"), out.input_ids, {out.batch, m});
      EXPECT_EQ(dtype("input_ids"), "torch.int64");
      if (out.attention_mask) {
        produced.insert("attention_mask");
        ExpectNpy(file("attention_mask"), *out.attention_mask, {out.rows("attention_mask"), m});
        EXPECT_EQ(dtype("attention_mask"), "torch.float32");
      }
      if (out.attention_bias) {
        produced.insert("attention_bias");
        const std::vector<int64_t> shape = {out.rows("attention_bias"), 1, m, m};
        if (out.attention_bias_is_bool) {
          std::vector<uint8_t> v(out.attention_bias->begin(), out.attention_bias->end());
          ExpectNpy(file("attention_bias"), v, shape);
          EXPECT_EQ(dtype("attention_bias"), "torch.bool");
        } else {
          std::vector<float> v(out.attention_bias->begin(), out.attention_bias->end());
          ExpectNpy(file("attention_bias"), v, shape);
          EXPECT_EQ(dtype("attention_bias"), "torch.float32");
        }
      }
      if (out.label_mask) {
        produced.insert("label_mask");
        ExpectNpy(file("label_mask"), *out.label_mask, {out.rows("label_mask"), m});
        EXPECT_EQ(dtype("label_mask"), "torch.bool");
      }
      if (out.index) {
        produced.insert("index");
        ExpectNpy(file("index"), *out.index, {out.rows("index")});
        EXPECT_EQ(dtype("index"), "torch.int64");
      }
      if (out.instance_mask) {
        produced.insert("instance_mask");
        ExpectNpy(file("instance_mask"), *out.instance_mask, {out.rows("instance_mask")});
        EXPECT_EQ(dtype("instance_mask"), "torch.bool");
      }
      if (out.doc_lens) {
        produced.insert("doc_lens");
        produced.insert("max_doc_lens");
        ExpectNpy(file("doc_lens"), *out.doc_lens, {out.rows("doc_lens"), out.doc_lens_width});
        EXPECT_EQ(dtype("doc_lens"), "torch.int32");
        ExpectSameValues(outputs.at("max_doc_lens").at("value").get<std::vector<int64_t>>(),
                         *out.max_doc_lens, "max_doc_lens");
      }
      if (!metadata.empty()) {
        produced.insert("metadata");
        EXPECT_EQ(outputs.at("metadata").at("value"), metadata);
      }
      std::set<std::string> want;
      for (const auto& [key, value] : outputs.items()) want.insert(key);
      EXPECT_EQ(produced, want);
    }
  }
  testing::PrintOlmoCounts("collator", static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace gridfeed::order
