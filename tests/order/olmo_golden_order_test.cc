// OLMo's order against the golden vectors: numpy's PCG64 units (rng), the global order
// (global_indices), what each rank, thread and worker yields (iter) and the batches each
// rank's DataLoader emits (dataloader). Every case of these kinds in index.json is walked.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_order.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"
#include "gridfeed/order/olmo/pcg64.h"
#include "olmo_golden_dataset.h"
#include "testing/sha256.h"

namespace gridfeed::order {
namespace {

using nlohmann::json;
using testing::ExpectNpy;
using testing::ExpectSameValues;
using testing::OlmoCasesOfKind;
using testing::SeedFromJson;

// Keys outside `known` mean the set records something this test does not check: a failure,
// never a silent pass.
void ExpectOnlyKeys(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    EXPECT_TRUE(known.count(key)) << where << ": unknown field '" << key << "'";
  }
}

unsigned __int128 ParseHex128(const std::string& text) {
  unsigned __int128 v = 0;
  for (size_t i = text.rfind("0x", 0) == 0 ? 2 : 0; i < text.size(); ++i) {
    const char c = text[i];
    const int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    v = (v << 4) | static_cast<unsigned>(d);
  }
  return v;
}

void ExpectU128(const json& hex, unsigned __int128 got, const std::string& what) {
  const unsigned __int128 want = ParseHex128(hex.get<std::string>());
  EXPECT_TRUE(want == got) << what << ": expected " << hex.get<std::string>();
  testing::OlmoValuesChecked() += 1;
}

std::vector<uint32_t> Arange(int64_t n) {
  std::vector<uint32_t> a(static_cast<size_t>(n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i);
  return a;
}

std::string Sha256LeU32(const std::vector<uint32_t>& v) {
  return testing::Sha256Hex(std::as_bytes(std::span<const uint32_t>(v)));
}

// ---- rng -------------------------------------------------------------------------------

void CheckRngEntry(const json& e, const std::string& dir) {
  const std::string seed_text = e.at("seed").get<std::string>();
  SCOPED_TRACE("seed " + seed_text);
  ExpectOnlyKeys(
      e,
      {"seed", "seed_bits", "entropy_words_u32", "pool_u32", "generate_state_8xu32",
       "generate_state_4xu64", "pcg_initstate_u128", "pcg_initseq_u128", "state_after_seeding_u128",
       "inc_u128", "first_next64", "first_next32", "shuffles", "big_shuffles"},
      dir);
  auto words = ParseSeedWords(seed_text);
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_EQ(SeedText(*words), seed_text);
  ExpectSameValues(e.at("entropy_words_u32").get<std::vector<uint32_t>>(), *words, "entropy");
  if (e.contains("seed_bits")) {
    const int bits =
        static_cast<int>(32 * (words->size() - 1)) + (32 - std::countl_zero(words->back()));
    EXPECT_EQ(bits, e["seed_bits"].get<int>());
  }
  const SeedSequence ss(*words);
  ExpectSameValues(e.at("pool_u32").get<std::vector<uint32_t>>(),
                   std::vector<uint32_t>(ss.pool(), ss.pool() + 4), "pool");
  const std::vector<uint32_t> state8 = ss.GenerateState32(8);
  ExpectSameValues(e.at("generate_state_8xu32").get<std::vector<uint32_t>>(), state8,
                   "generate_state");
  const auto state4 = e.at("generate_state_4xu64");
  ASSERT_EQ(state4.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    const uint64_t got = uint64_t{state8[2 * k]} | (uint64_t{state8[2 * k + 1]} << 32);
    ExpectU128(state4[k], got, "generate_state_4xu64");
  }
  const auto s64 = [&](int k) {
    return uint64_t{state8[2 * k]} | (uint64_t{state8[2 * k + 1]} << 32);
  };
  ExpectU128(e.at("pcg_initstate_u128"), (static_cast<unsigned __int128>(s64(0)) << 64) | s64(1),
             "initstate");
  ExpectU128(e.at("pcg_initseq_u128"), (static_cast<unsigned __int128>(s64(2)) << 64) | s64(3),
             "initseq");
  const Pcg64 seeded(*words);
  ExpectU128(e.at("state_after_seeding_u128"), seeded.state(), "state after seeding");
  ExpectU128(e.at("inc_u128"), seeded.inc(), "inc");
  {
    Pcg64 rng(*words);
    for (const auto& h : e.at("first_next64")) ExpectU128(h, rng.Next64(), "next64");
  }
  {
    Pcg64 rng(*words);
    std::vector<uint32_t> got;
    const auto want = e.at("first_next32").get<std::vector<uint32_t>>();
    for (size_t i = 0; i < want.size(); ++i) got.push_back(rng.Next32());
    ExpectSameValues(want, got, "next32");
  }
  for (const auto& [n_text, s] : e.at("shuffles").items()) {
    ExpectOnlyKeys(s, {"values", "file"}, dir + " shuffles");
    const int64_t n = std::stoll(n_text);
    Pcg64 rng(*words);
    std::vector<uint32_t> a = Arange(n);
    ShuffleUint32(rng, a);
    if (s.contains("values")) {
      ExpectSameValues(s["values"].get<std::vector<uint32_t>>(), a, "shuffle n=" + n_text);
    } else {
      ExpectNpy(dir + "/" + s.at("file").get<std::string>(), a, {n});
    }
  }
  if (e.contains("big_shuffles")) {
    for (const auto& [n_text, s] : e["big_shuffles"].items()) {
      ExpectOnlyKeys(s, {"sha256_le_u32", "first16", "last16"}, dir + " big_shuffles");
      const int64_t n = std::stoll(n_text);
      Pcg64 rng(*words);
      std::vector<uint32_t> a = Arange(n);
      ShuffleUint32(rng, a);
      EXPECT_EQ(Sha256LeU32(a), s.at("sha256_le_u32").get<std::string>()) << "n=" << n_text;
      const auto first = s.at("first16").get<std::vector<uint32_t>>();
      const auto last = s.at("last16").get<std::vector<uint32_t>>();
      ExpectSameValues(first, std::vector<uint32_t>(a.begin(), a.begin() + first.size()),
                       "first16");
      ExpectSameValues(last, std::vector<uint32_t>(a.end() - last.size(), a.end()), "last16");
      testing::OlmoValuesChecked() += n;  // through the hash
    }
  }
}

TEST(OlmoGolden, Rng) {
  const auto cases = OlmoCasesOfKind("rng");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOnlyKeys(c.json, {"kind", "name", "description", "entries"}, c.dir);
    for (const auto& e : c.json.at("entries")) CheckRngEntry(e, c.dir);
  }
  testing::PrintOlmoCounts("rng", static_cast<int>(cases.size()));
}

// 32-bit draws are the low then the high half of one 64-bit output, and a half left buffered
// by one shuffle is the first draw of the next on the same generator (numpy's behaviour).
TEST(OlmoRng, HalvesAndBufferedHalfCarryOver) {
  Pcg64 a(SeedWordsOf(6198));
  Pcg64 b(SeedWordsOf(6198));
  const uint64_t v = b.Next64();
  EXPECT_EQ(a.Next32(), static_cast<uint32_t>(v));
  EXPECT_EQ(a.Next32(), static_cast<uint32_t>(v >> 32));
  // Shuffling arange(2) draws one 32-bit value; a second shuffle starts from the buffered half.
  Pcg64 c(SeedWordsOf(42));
  std::vector<uint32_t> x = Arange(2);
  ShuffleUint32(c, x);
  Pcg64 d(SeedWordsOf(42));
  const uint64_t first = d.Next64();
  EXPECT_EQ(x[0], 1u - static_cast<uint32_t>(first & 1u));  // j = 0 swaps the two
  EXPECT_EQ(c.Next32(), static_cast<uint32_t>(first >> 32));
}

TEST(OlmoRng, SeedArithmetic) {
  EXPECT_EQ(SeedWordsOf(0), SeedWords{0});
  EXPECT_EQ(SeedWordsOf(0xffffffffULL), SeedWords{0xffffffffu});
  EXPECT_EQ(AddToSeed(SeedWordsOf(0xffffffffULL), 1), (SeedWords{0, 1}));
  EXPECT_EQ(*ParseSeedWords("18446744073709551617"), (SeedWords{1, 0, 1}));
  EXPECT_EQ(SeedText(AddToSeed(*ParseSeedWords("340282366920938463463374607431768211455"), 4)),
            "340282366920938463463374607431768211459");
  EXPECT_FALSE(ParseSeedWords("-1").ok());
  EXPECT_FALSE(ParseSeedWords("").ok());
  EXPECT_FALSE(ParseSeedWords("12a").ok());
}

// The split form shuffles head ++ tail exactly as one array.
TEST(OlmoRng, SplitShuffleEqualsWhole) {
  for (int64_t n : {2, 5, 100, 1001}) {
    for (int64_t cut : {int64_t{0}, int64_t{1}, n / 2, n - 1, n}) {
      std::vector<uint32_t> whole = Arange(n);
      Pcg64 a(SeedWordsOf(static_cast<uint64_t>(n)));
      ShuffleUint32(a, whole);
      std::vector<uint32_t> split = Arange(n);
      Pcg64 b(SeedWordsOf(static_cast<uint64_t>(n)));
      ShuffleUint32(b, std::span<uint32_t>(split).first(cut),
                    std::span<uint32_t>(split).subspan(cut));
      EXPECT_EQ(whole, split) << n << " " << cut;
    }
  }
}

// ---- global_indices --------------------------------------------------------------------

void CheckGlobalIndicesEntry(const json& e, const std::string& dir) {
  ExpectOnlyKeys(e,
                 {"dataset_len",
                  "seed",
                  "epoch",
                  "shuffle",
                  "drop_last",
                  "world_size",
                  "global_batch_size",
                  "shuffle_seed",
                  "total_size",
                  "device_batch_size",
                  "length",
                  "dtype",
                  "values",
                  "file",
                  "work_dir_file_bytes",
                  "sha256_le_u32",
                  "work_dir_error",
                  "reshuffle_to",
                  "reshuffled_values",
                  "reshuffled_file"},
                 dir);
  const int64_t n = e.at("dataset_len").get<int64_t>();
  const int64_t w = e.at("world_size").get<int64_t>();
  const int64_t epoch = e.at("epoch").get<int64_t>();
  const bool shuffle = e.at("shuffle").get<bool>();
  const bool drop_last = e.at("drop_last").get<bool>();
  const SeedWords seed = SeedFromJson(e.at("seed"));
  SCOPED_TRACE("N " + std::to_string(n) + " W " + std::to_string(w) + " seed " + SeedText(seed) +
               " epoch " + std::to_string(epoch));
  const SeedWords seed_plus_epoch = AddToSeed(seed, static_cast<uint64_t>(epoch));
  EXPECT_EQ(SeedText(seed_plus_epoch), e.at("shuffle_seed").get<std::string>());
  auto sizes = OlmoSizesFor(n, w, e.at("global_batch_size").get<int64_t>(), drop_last);
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  EXPECT_EQ(sizes->total_size, e.at("total_size").get<int64_t>());
  EXPECT_EQ(sizes->device_batch_size, e.at("device_batch_size").get<int64_t>());
  EXPECT_EQ(e.value("dtype", "uint32"), "uint32");
  const std::vector<uint32_t> g = OlmoGlobalIndices(n, seed_plus_epoch, shuffle, *sizes);
  EXPECT_EQ(static_cast<int64_t>(g.size()), e.at("length").get<int64_t>());
  if (e.contains("values")) {
    ExpectSameValues(e["values"].get<std::vector<uint32_t>>(), g, "values");
  } else {
    ExpectNpy(dir + "/" + e.at("file").get<std::string>(), g, {sizes->total_size});
  }
  // The work_dir file: raw little-endian uint32, or OLMo's crash on an empty order, which
  // gridfeed reports as an error.
  const Status writable = OlmoCheckOrderNotEmpty(n, w, *sizes);
  if (e.contains("work_dir_error")) {
    EXPECT_FALSE(writable.ok()) << "OLMo: " << e["work_dir_error"].get<std::string>();
    EXPECT_EQ(writable.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(writable.message().find("empty"), std::string::npos) << writable.ToString();
  } else {
    EXPECT_TRUE(writable.ok()) << writable.ToString();
    EXPECT_EQ(e.at("work_dir_file_bytes").get<int64_t>(), sizes->total_size * 4);
    EXPECT_EQ(Sha256LeU32(g), e.at("sha256_le_u32").get<std::string>());
  }
  if (e.contains("reshuffle_to") && !e["reshuffle_to"].is_null()) {
    const int64_t to = e["reshuffle_to"].get<int64_t>();
    const std::vector<uint32_t> r =
        OlmoGlobalIndices(n, AddToSeed(seed, static_cast<uint64_t>(to)), shuffle, *sizes);
    if (e.contains("reshuffled_values")) {
      ExpectSameValues(e["reshuffled_values"].get<std::vector<uint32_t>>(), r, "reshuffled");
    } else {
      ExpectNpy(dir + "/" + e.at("reshuffled_file").get<std::string>(), r, {sizes->total_size});
    }
  }
}

TEST(OlmoGolden, GlobalIndices) {
  const auto cases = OlmoCasesOfKind("global_indices");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOnlyKeys(c.json, {"kind", "name", "description", "olmo_call", "entries"}, c.dir);
    for (const auto& e : c.json.at("entries")) CheckGlobalIndicesEntry(e, c.dir);
  }
  testing::PrintOlmoCounts("global_indices", static_cast<int>(cases.size()));
}

// ---- iter ------------------------------------------------------------------------------

// OLMo's threads: thread t makes s[t::nt], merged round-robin (olmo.util.roundrobin).
std::vector<int64_t> ThreadedOrder(const std::vector<int64_t>& s, int64_t nt) {
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(nt));
  for (size_t i = 0; i < s.size(); ++i) parts[i % nt].push_back(s[i]);
  std::vector<int64_t> out;
  for (size_t k = 0; out.size() < s.size(); ++k) {
    for (const auto& p : parts) {
      if (k < p.size()) out.push_back(p[k]);
    }
  }
  return out;
}

// The items a rank yields (dataset[idx] plus "index"), stacked.
void CheckYieldedItems(const testing::GoldenDataset& d, const std::vector<int64_t>& stream,
                       const std::string& dir, const json& fields) {
  EXPECT_EQ(testing::ItemFields(d, true), fields.get<std::set<std::string>>());
  std::vector<int64_t> input_ids, index;
  for (int64_t i : stream) {
    auto item = GetOlmoItem(d.files, i, d.options);
    ASSERT_TRUE(item.ok()) << item.status().ToString();
    input_ids.insert(input_ids.end(), item->input_ids.begin(), item->input_ids.end());
    index.push_back(item->index);
  }
  const int64_t n = static_cast<int64_t>(stream.size());
  ExpectNpy(dir + "/input_ids.npy", input_ids, {n, d.chunk_size});
  ExpectNpy(dir + "/index.npy", index, {n});
}

TEST(OlmoGolden, Iter) {
  const auto cases = OlmoCasesOfKind("iter");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& j = c.json;
    ExpectOnlyKeys(
        j, {"kind", "name", "description", "dataset", "params", "global_indices", "ranks"}, c.dir);
    const json& p = j.at("params");
    ExpectOnlyKeys(p,
                   {"global_batch_size", "device_batch_size", "seed", "epoch", "start_index",
                    "max_examples", "shuffle", "drop_last", "world_size", "total_size"},
                   c.dir + " params");
    // A range (item i is i) or a real MemMapDataset, whose yielded items are stored too.
    const json& dataset = j.at("dataset");
    ExpectOnlyKeys(dataset, {"type", "len", "note", "olmo_call"}, c.dir + " dataset");
    const int64_t n = dataset.at("len").get<int64_t>();
    std::optional<testing::GoldenDataset> memmap;
    if (dataset.at("type").get<std::string>() != "range") {
      EXPECT_EQ(dataset["type"].get<std::string>(), "MemMapDataset");
      memmap = testing::DatasetFromCall(dataset.at("olmo_call"));
      EXPECT_EQ(memmap->files.size(), n);
    }
    const int64_t w = p.at("world_size").get<int64_t>();
    auto sizes =
        OlmoSizesFor(n, w, p.at("global_batch_size").get<int64_t>(), p.at("drop_last").get<bool>());
    ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
    EXPECT_EQ(sizes->total_size, p.at("total_size").get<int64_t>());
    EXPECT_EQ(sizes->device_batch_size, p.at("device_batch_size").get<int64_t>());
    const SeedWords seed = AddToSeed(SeedFromJson(p.at("seed")), p.at("epoch").get<uint64_t>());
    const std::vector<uint32_t> g = OlmoGlobalIndices(n, seed, p.at("shuffle").get<bool>(), *sizes);
    ExpectSameValues(j.at("global_indices").get<std::vector<int64_t>>(), g, "global_indices");
    const int64_t start = p.at("start_index").get<int64_t>();
    const int64_t max_examples =
        p.at("max_examples").is_null() ? -1 : p["max_examples"].get<int64_t>();
    for (const auto& r : j.at("ranks")) {
      ExpectOnlyKeys(r,
                     {"rank", "total_size", "device_batch_size", "main_process",
                      "main_process_same_for_num_threads", "workers", "items_dir", "item_fields"},
                     c.dir + " ranks");
      const int64_t rank = r.at("rank").get<int64_t>();
      SCOPED_TRACE("rank " + std::to_string(rank));
      EXPECT_EQ(r.at("total_size").get<int64_t>(), sizes->total_size);
      EXPECT_EQ(r.at("device_batch_size").get<int64_t>(), sizes->device_batch_size);
      const std::vector<int64_t> s = OlmoRankStream(g, rank, w, start, max_examples);
      const auto main = r.at("main_process").get<std::vector<int64_t>>();
      ExpectSameValues(main, s, "main_process");
      for (const auto& nt : r.at("main_process_same_for_num_threads")) {
        ExpectSameValues(main, ThreadedOrder(s, nt.is_null() ? 4 : nt.get<int64_t>()), "threads");
      }
      if (r.contains("items_dir")) {
        ASSERT_TRUE(memmap.has_value()) << "items of a range dataset";
        CheckYieldedItems(*memmap, s, c.dir + "/" + r["items_dir"].get<std::string>(),
                          r.at("item_fields"));
      }
      for (const auto& [k_text, lists] : r.at("workers").items()) {
        const int64_t k = std::stoll(k_text);
        ASSERT_EQ(static_cast<int64_t>(lists.size()), k);
        for (int64_t worker = 0; worker < k; ++worker) {
          ExpectSameValues(lists[worker].get<std::vector<int64_t>>(),
                           OlmoWorkerStream(s, sizes->device_batch_size, worker, k),
                           "worker " + std::to_string(worker) + " of " + k_text);
        }
      }
    }
  }
  testing::PrintOlmoCounts("iter", static_cast<int>(cases.size()));
}

// ---- dataloader ------------------------------------------------------------------------

// A batch as DataCollator makes it from the items of `index`.
void CheckCollatedBatch(const testing::GoldenDataset& d, const std::vector<int64_t>& index,
                        const std::string& pad_direction, const json& want,
                        const std::string& dir) {
  ExpectOnlyKeys(
      want,
      {"worker", "index", "size", "dir", "files", "max_doc_lens", "attention_mask_dtype_in_olmo"},
      dir);
  std::vector<CollatorItem> items;
  for (int64_t i : index) {
    auto item = GetOlmoItem(d.files, i, d.options);
    ASSERT_TRUE(item.ok()) << item.status().ToString();
    items.push_back(testing::ToCollatorItem(*item));
  }
  const CollatedBatch out =
      Collate(items, pad_direction == "left" ? PadDirection::kLeft : PadDirection::kRight,
              d.options.pad_token_id.value_or(0));
  const int64_t b = out.batch, m = out.max_len;
  std::set<std::string> files = {"input_ids.npy", "index.npy"};
  ExpectNpy(dir + "/input_ids.npy", out.input_ids, {b, m});
  ExpectNpy(dir + "/index.npy", *out.index, {b});
  if (out.attention_mask) {
    files.insert("attention_mask.npy");
    ExpectNpy(dir + "/attention_mask.npy", *out.attention_mask, {b, m});
    EXPECT_EQ(want.value("attention_mask_dtype_in_olmo", ""), "torch.float32");
  }
  if (out.label_mask) {
    files.insert("label_mask.npy");
    ExpectNpy(dir + "/label_mask.npy", *out.label_mask, {b, m});
  }
  if (out.instance_mask) {
    files.insert("instance_mask.npy");
    ExpectNpy(dir + "/instance_mask.npy", *out.instance_mask, {b});
  }
  if (out.doc_lens) {
    files.insert("doc_lens.npy");
    ExpectNpy(dir + "/doc_lens.npy", *out.doc_lens, {b, out.doc_lens_width});
    ExpectSameValues(want.at("max_doc_lens").get<std::vector<int64_t>>(), *out.max_doc_lens,
                     "max_doc_lens");
  }
  EXPECT_EQ(files, want.at("files").get<std::set<std::string>>());
}

TEST(OlmoGolden, DataLoader) {
  const auto cases = OlmoCasesOfKind("dataloader");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& j = c.json;
    ExpectOnlyKeys(j,
                   {"kind", "name", "description", "olmo_call", "train_config", "world_size",
                    "runs", "order_summary"},
                   c.dir);
    const json& tc = j.at("train_config");
    const json& data = tc.at("data");
    ExpectOnlyKeys(
        tc,
        {"seed", "epoch", "global_train_batch_size", "device_train_batch_size", "model", "data"},
        c.dir + " train_config");
    ExpectOnlyKeys(tc.at("model"), {"max_sequence_length", "pad_token_id", "eos_token_id"},
                   c.dir + " model");
    // The DataLoader's own knobs (workers, threads, pinning, prefetching) leave the order as
    // it is; the workers come from each run's num_workers.
    ExpectOnlyKeys(data,
                   {"paths", "datasets", "label_mask_paths", "memmap_dtype", "drop_last", "seed",
                    "generate_attention_mask", "generate_doc_lengths", "instance_filter",
                    "pad_direction", "num_workers", "num_threads", "pin_memory", "prefetch_factor",
                    "persistent_workers", "timeout"},
                   c.dir + " data");
    // build_train_dataloader: include_instance_metadata false.
    const testing::GoldenDataset d = testing::DatasetFromConfig(tc.at("model"), data, false);
    ASSERT_EQ(d.files.files().size(), d.paths.size()) << "not opened";
    const int64_t n = d.files.size();
    const std::string pad_direction = data.value("pad_direction", "right");
    const int64_t w = j.at("world_size").get<int64_t>();
    const bool drop_last = data.value("drop_last", false);
    auto sizes = OlmoSizesFor(n, w, tc.at("global_train_batch_size").get<int64_t>(), drop_last);
    ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
    EXPECT_EQ(sizes->device_batch_size, tc.at("device_train_batch_size").get<int64_t>());
    // data.seed overrides the train seed.
    const SeedWords seed = SeedFromJson(
        data.contains("seed") && !data["seed"].is_null() ? data["seed"] : tc.at("seed"));
    std::map<int64_t, std::map<int64_t, std::vector<OlmoLoaderBatch>>> flat_by_rank;
    for (const auto& run : j.at("runs")) {
      const int64_t rank = run.at("rank").get<int64_t>();
      const int64_t k = run.at("num_workers").get<int64_t>();
      SCOPED_TRACE("rank " + std::to_string(rank) + " num_workers " + std::to_string(k));
      EXPECT_EQ(run.at("total_size").get<int64_t>(), sizes->total_size);
      EXPECT_EQ(run.at("device_batch_size").get<int64_t>(), sizes->device_batch_size);
      EXPECT_EQ(run.at("dataloader_batch_size").get<int64_t>(), sizes->device_batch_size);
      EXPECT_EQ(run.at("dataloader_drop_last").get<bool>(), drop_last);
      // The first epoch is train_config.epoch (null: 0), as OLMo's trainer starts.
      const json& first_epoch = tc.at("epoch");
      EXPECT_EQ(run.at("epochs").at(0).at("epoch").get<int64_t>(),
                first_epoch.is_null() ? 0 : first_epoch.get<int64_t>());
      for (const auto& ep : run.at("epochs")) {
        const int64_t epoch = ep.at("epoch").get<int64_t>();
        const int64_t start = ep.at("start_index").get<int64_t>();
        SCOPED_TRACE("epoch " + std::to_string(epoch) + " start " + std::to_string(start));
        const auto g =
            OlmoGlobalIndices(n, AddToSeed(seed, static_cast<uint64_t>(epoch)), true, *sizes);
        const auto s = OlmoRankStream(g, rank, w, start, -1);
        const auto batches = OlmoLoaderBatches(s, sizes->device_batch_size, k, drop_last);
        const auto& want = ep.at("batches");
        ASSERT_EQ(want.size(), batches.size());
        for (size_t b = 0; b < batches.size(); ++b) {
          EXPECT_EQ(want[b].at("worker").get<int64_t>(), batches[b].worker) << "batch " << b;
          EXPECT_EQ(want[b].at("size").get<int64_t>(),
                    static_cast<int64_t>(batches[b].index.size()));
          ExpectSameValues(want[b].at("index").get<std::vector<int64_t>>(), batches[b].index,
                           "batch " + std::to_string(b));
          if (want[b].contains("dir")) {
            CheckCollatedBatch(d, batches[b].index, pad_direction, want[b],
                               c.dir + "/" + want[b]["dir"].get<std::string>());
          }
        }
        // The tail past the full batches, without materialising it.
        const auto tail =
            OlmoLoaderTail(static_cast<int64_t>(s.size()), sizes->device_batch_size, k, drop_last);
        std::vector<int64_t> want_tail;
        for (const auto& b : batches) {
          if (static_cast<int64_t>(b.index.size()) < sizes->device_batch_size) {
            want_tail.insert(want_tail.end(), b.index.begin(), b.index.end());
          }
        }
        std::vector<int64_t> got_tail;
        for (int64_t pos : tail) got_tail.push_back(s[pos]);
        ExpectSameValues(want_tail, got_tail, "tail");
        if (ep == run.at("epochs").front()) flat_by_rank[rank][k] = batches;
      }
    }
    for (const auto& summary : j.at("order_summary")) {
      const int64_t rank = summary.at("rank").get<int64_t>();
      const auto& by_k = flat_by_rank[rank];
      std::set<std::vector<int64_t>> flats;
      for (const auto& [k_text, want_sizes] : summary.at("batch_sizes_by_num_workers").items()) {
        const auto it = by_k.find(std::stoll(k_text));
        ASSERT_NE(it, by_k.end()) << k_text;
        std::vector<int64_t> got_sizes, flat;
        for (const auto& b : it->second) {
          got_sizes.push_back(static_cast<int64_t>(b.index.size()));
          flat.insert(flat.end(), b.index.begin(), b.index.end());
        }
        ExpectSameValues(want_sizes.get<std::vector<int64_t>>(), got_sizes, "batch sizes");
        flats.insert(flat);
      }
      EXPECT_EQ(flats.size() == 1,
                summary.at("flat_order_identical_across_num_workers").get<bool>());
    }
  }
  testing::PrintOlmoCounts("dataloader", static_cast<int>(cases.size()));
}

// The feeder's positions (OlmoPositions, what `gridfeed run` and the Python Feeder read) give
// every golden DataLoader epoch and restart: a start at --consumed-samples (epoch - first epoch)
// x total_size + start_index, walked as the read schedule walks it (rank r reads slots
// [r*mbs, (r+1)*mbs) of every mbs x W positions after the start), for micro-batches of 1 and of
// the device batch and every recorded num_workers.
TEST(OlmoGolden, DataLoaderThroughFeederPositions) {
  const auto cases = OlmoCasesOfKind("dataloader");
  int checked = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& tc = c.json.at("train_config");
    const json& data = tc.at("data");
    if (data.value("drop_last", false)) continue;  // restarts are recorded without drop_last
    config::JobOptions o;
    for (const auto& path : data.at("paths")) {
      o.data.olmo_paths.push_back(testing::OlmoGoldenDir() + "/" + path.get<std::string>());
    }
    o.data.olmo_memmap_dtype = data.value("memmap_dtype", "uint16");
    o.data.seq_length = tc.at("model").at("max_sequence_length").get<int64_t>();
    const json& seed = data.contains("seed") && !data["seed"].is_null() ? data["seed"] : tc["seed"];
    o.data.seed = seed.get<int64_t>();
    const int64_t first = tc.at("epoch").is_null() ? 0 : tc["epoch"].get<int64_t>();
    o.data.olmo_epoch = first;
    const int64_t w = c.json.at("world_size").get<int64_t>();
    o.grid.data_parallel_size = w;
    o.batch.global_batch_size = tc.at("global_train_batch_size").get<int64_t>();
    const int64_t b = tc.at("device_train_batch_size").get<int64_t>();
    std::map<int64_t, std::map<int64_t, const json*>> runs;  // num_workers -> rank -> run
    for (const auto& run : c.json.at("runs")) {
      runs[run.at("num_workers").get<int64_t>()][run.at("rank").get<int64_t>()] = &run;
    }
    for (const auto& [k, by_rank] : runs) {
      o.data.olmo_num_workers = k;
      const json& epochs = by_rank.at(0)->at("epochs");
      for (size_t e = 0; e < epochs.size(); ++e) {
        const int64_t epoch = epochs[e].at("epoch").get<int64_t>();
        const int64_t start = epochs[e].at("start_index").get<int64_t>();
        if (start == 0 && epoch != first) continue;  // reshuffled epochs follow the first
        const int64_t total = by_rank.at(0)->at("total_size").get<int64_t>();
        for (int64_t mbs : {int64_t{1}, b}) {
          SCOPED_TRACE("K " + std::to_string(k) + " epoch " + std::to_string(epoch) + " start " +
                       std::to_string(start) + " mbs " + std::to_string(mbs));
          o.batch.micro_batch_size = mbs;
          o.resume.consumed_samples = (epoch - first) * total + start;
          o.run.train_iters = total / w / b + 2;
          auto plan = PlanOlmoOrder(o);
          ASSERT_TRUE(plan.ok()) << plan.status().ToString();
          const OlmoPositions positions(*plan);
          std::map<int64_t, std::vector<uint32_t>> orders;  // epoch offset -> global order
          for (int64_t r = 0; r < w; ++r) {
            std::vector<int64_t> want;
            for (const auto& batch : by_rank.at(r)->at("epochs")[e].at("batches")) {
              for (const auto& i : batch.at("index")) want.push_back(i.get<int64_t>());
            }
            std::vector<int64_t> got;
            for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
              const int64_t p = o.resume.consumed_samples + (i / mbs) * mbs * w + r * mbs + i % mbs;
              ASSERT_LT(p, plan->length);
              const OlmoSlot slot = positions.Locate(p);
              auto it = orders.find(slot.epoch);
              if (it == orders.end()) {
                const SeedWords s = AddToSeed(SeedWordsOf(static_cast<uint64_t>(o.data.seed)),
                                              static_cast<uint64_t>(first + slot.epoch));
                it = orders
                         .emplace(slot.epoch,
                                  OlmoGlobalIndices(plan->instances, s, true, plan->sizes))
                         .first;
              }
              got.push_back(it->second.at(static_cast<size_t>(slot.global_index)));
            }
            ExpectSameValues(want, got, "rank " + std::to_string(r));
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Every case kind in index.json is one this binary (or the items binary) checks, and every
// listed folder exists.
TEST(OlmoGolden, IndexListsOnlyKnownKinds) {
  const std::string root = testing::OlmoGoldenDir();
  const json index = testing::ReadOlmoJson(root + "/index.json");
  const std::set<std::string> known = {"memmap", "global_indices", "iter",     "dataloader",
                                       "filter", "doclens",        "collator", "rng"};
  ASSERT_TRUE(index.contains("cases")) << root;
  EXPECT_FALSE(index["cases"].empty());
  for (const auto& c : index["cases"]) {
    const std::string kind = c.at("kind").get<std::string>();
    EXPECT_TRUE(known.count(kind)) << "unknown case kind '" << kind << "' (" << c.dump() << ")";
    EXPECT_TRUE(std::filesystem::is_directory(root + "/" + c.at("dir").get<std::string>()))
        << "missing case folder " << c.at("dir");
  }
}

}  // namespace
}  // namespace gridfeed::order
