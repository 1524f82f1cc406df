#include "gridfeed/order/megatron/megatron_pipeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <thread>

#include "gridfeed/core/check.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/mmap_file.h"
#include "gridfeed/order/megatron/deferred_store.h"
#include "gridfeed/order/node_image.h"
#include "gridfeed/order/table_image.h"
#include "gridfeed/order/table_view.h"

namespace gridfeed::order {
namespace {

using Stores = OpenStores;

// A store's facts, its .bin's sampled blocks read through a descriptor onto the very file the
// store maps, told to read only what is asked (POSIX_FADV_RANDOM): faulting 64 blocks of each
// of 1,000 files in through the mappings read ahead around every one (a sparse file's holes
// included) and cost tens of seconds on a virtual machine. Falls back to the mapping.
StoreFacts FactsOfStore(const std::string& prefix, const io::IndexedDataset& store, uint64_t salt) {
  const io::MMapFile& bin = store.data_file();
  int fd = TestingFullStoreCheck() ? -1 : ::open(bin.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const auto id = io::FileIdentity(fd, bin.path());
    if (id.ok() && *id == bin.identity()) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    } else {
      ::close(fd);
      fd = -1;
    }
  }
  auto read = [fd](uint64_t offset, std::span<std::byte> out) {
    for (size_t done = 0; done < out.size();) {
      if (fd < 0) return false;
      const ssize_t n =
          ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  };
  StoreFacts f =
      FactsWithIndexDigestRead(prefix, store.index_xxh3(), store.data_bytes(), salt, read);
  if (fd >= 0) ::close(fd);
  return f;
}

class MegatronView final : public OrderView {
 public:
  MegatronView(TableView view, SampleOptions sample_options, Stores stores)
      : view_(std::move(view)), sample_options_(sample_options), stores_(std::move(stores)) {
    Bind();
  }

  int64_t length(Split split) const override {
    const auto& s = view_.splits[static_cast<int>(split)];
    return s ? s->length : 0;
  }
  const std::vector<std::string>& token_stores() const override { return view_.prefixes; }

  std::vector<std::string> TokenFiles() const override {
    std::vector<std::string> files;
    for (const auto& prefix : view_.prefixes) {
      files.push_back(prefix + ".idx");
      files.push_back(prefix + ".bin");
    }
    return files;
  }

  Status OpenTokenStores(bool checked_on_node) override {
    std::vector<const std::string*> todo;
    for (const auto& prefix : view_.prefixes) {
      if (stores_.count(prefix)) continue;
      if (checked_on_node) {  // opened at its first read (deferred_store.h)
        if (!deferred_.count(prefix)) deferred_[prefix] = std::make_unique<DeferredStore>(prefix);
        continue;
      }
      todo.push_back(&prefix);
    }
    // A store checked here in full is then named by its digest (TokenStoreFacts): the check
    // computes it from its own reads. On a few threads, as the facts are: each open waits on
    // storage more than on a core (world rank 0 checks every store other producers built).
    std::vector<std::optional<Result<io::IndexedDataset>>> opened(todo.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
        try {
          opened[i].emplace(
              io::IndexedDataset::Open(*todo[i], false, io::IndexCheck::kFull, /*digest=*/true));
        } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
          opened[i].emplace(Internal("opening '" + *todo[i] + "': " + e.what()));
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      for (size_t t = 1; t < std::min<size_t>(todo.size(), 4); ++t) pool.emplace_back(worker);
      worker();
    }
    for (size_t i = 0; i < todo.size(); ++i) {  // the first failure in the stores' order
      if (!opened[i]->ok()) return opened[i]->status();
      stores_[*todo[i]] = std::make_shared<const io::IndexedDataset>(std::move(*opened[i]).value());
    }
    Bind();
    return Status::Ok();
  }

  void AdoptTokenStores(const Stores& stores) override {
    for (const auto& prefix : view_.prefixes) {
      const auto it = stores.find(prefix);
      if (it != stores.end() && !stores_.count(prefix) && it->second->Unchanged()) {
        stores_[prefix] = it->second;
      }
    }
    Bind();
  }

  // On a few threads: each store's reads wait on storage (a shared filesystem) more than on a
  // core.
  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    std::vector<std::pair<const std::string*, const io::IndexedDataset*>> open;
    for (const auto& prefix : view_.prefixes) {
      const auto it = stores_.find(prefix);
      if (it != stores_.end()) open.emplace_back(&prefix, it->second.get());
    }
    std::vector<StoreFacts> out(open.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < open.size();) {
        out[i] = FactsOfStore(*open[i].first, *open[i].second, salt);
      }
    };
    {
      const size_t threads = TestingFullStoreCheck() ? 1 : std::min<size_t>(open.size(), 4);
      std::vector<std::jthread> pool;
      for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
      worker();
    }
    return out;
  }

  SampleRecord Read(Split split, int64_t position, Sample* out, bool hash_tokens) const override {
    const int i = static_cast<int>(split);
    const SplitView& s = *view_.splits[i];
    const auto [k, j] = s.Locate(position);
    const auto& source = s.sources[k];
    AssembleSample(bound_[i][k].get(), source.tables, j, options_[i][k], out);
    return Record(s, position, k, j,
                  hash_tokens ? std::span<const int64_t>(out->tokens) : std::span<const int64_t>());
  }

  SampleRecord ReadFields(Split split, int64_t position, const FieldTargets& out, bool hash_tokens,
                          AssemblyScratch* scratch) const override {
    const int i = static_cast<int>(split);
    const SplitView& s = *view_.splits[i];
    const auto [k, j] = s.Locate(position);
    const auto& source = s.sources[k];
    const io::IndexedDataset& ds = bound_[i][k].get();
    const SampleOptions& o = options_[i][k];
    AssembleFields(ds, source.tables, j, o, out, scratch);
    std::span<const int64_t> tokens;
    if (hash_tokens) {
      const int64_t S = o.seq_length;
      if (out.tokens && out.cp_size == 1) {
        tokens = {out.tokens, static_cast<size_t>(S)};
      } else {
        // The hash covers the whole sample's tokens, more than a CP slice holds.
        scratch->full_tokens.resize(static_cast<size_t>(S));
        FieldTargets whole;
        whole.tokens = scratch->full_tokens.data();
        AssembleFields(ds, source.tables, j, o, whole, scratch);
        tokens = scratch->full_tokens;
      }
    }
    return Record(s, position, k, j, tokens);
  }

  bool is_blend(Split split) const override {
    const auto& s = view_.splits[static_cast<int>(split)];
    return s && s->blended;
  }

  SampleRecord Window(Split split, int64_t position, std::vector<int64_t>* window) const {
    const int i = static_cast<int>(split);
    const SplitView& s = *view_.splits[i];
    const auto [k, j] = s.Locate(position);
    const auto& source = s.sources[k];
    GatherWindow(bound_[i][k].get(), source.tables, j, options_[i][k].seq_length, window);
    return Record(s, position, k, j, {});
  }

  int SourceOf(Split split, int64_t position) const override {
    return view_.splits[static_cast<int>(split)]->SourceAt(position);
  }

  std::vector<SourceInfo> Sources(Split split) const override {
    std::vector<SourceInfo> out;
    const auto& s = view_.splits[static_cast<int>(split)];
    if (!s) return out;
    for (size_t k = 0; k < s->sources.size(); ++k) {
      out.push_back({s->sources[k].prefix, s->blended ? s->weights[k] : 1.0,
                     s->sources[k].samples_per_epoch, s->sources[k].seq_length});
    }
    return out;
  }

 private:
  // Row `j` of source `k`'s tables serves `position`; the record names the source's own sample
  // (another number than `j` in a node image).
  static SampleRecord Record(const SplitView& s, int64_t position, int k, int64_t j,
                             std::span<const int64_t> tokens) {
    SampleRecord r = MakeSampleRecord(position, k, j, s.sources[k].tables, tokens);
    if (s.held_only) r.dataset_sample = s.SourceSample(position);
    return r;
  }

  // Per split and source, the open store (no map lookup per sample) and how its samples are
  // assembled (a source built at its own length: a mixture stage's seq_length).
  void Bind() {
    for (int i = 0; i < 3; ++i) {
      bound_[i].clear();
      options_[i].clear();
      if (!view_.splits[i]) continue;
      for (const auto& source : view_.splits[i]->sources) {
        BoundStore b;
        if (auto it = stores_.find(source.prefix); it != stores_.end()) b.open = it->second.get();
        if (auto it = deferred_.find(source.prefix); it != deferred_.end() && !b.open) {
          b.deferred = it->second.get();
        }
        bound_[i].push_back(b);
        options_[i].push_back(sample_options_);
        if (source.seq_length > 0) options_[i].back().seq_length = source.seq_length;
      }
    }
  }

  TableView view_;
  SampleOptions sample_options_;
  Stores stores_;
  std::map<std::string, std::unique_ptr<DeferredStore>> deferred_;
  std::array<std::vector<BoundStore>, 3> bound_;
  std::array<std::vector<SampleOptions>, 3> options_;
};

class MegatronBuilt final : public BuiltOrder {
 public:
  MegatronBuilt(BuiltDatasets built, SampleOptions sample_options)
      : built_(std::move(built)), sample_options_(sample_options) {
    view_ = std::make_unique<MegatronView>(ViewOf(built_), sample_options_, OpenedStores());
  }

  Stores OpenedStores() const override {
    Stores stores;
    for (const auto& split : built_.splits) {
      if (!split) continue;
      for (const auto& m : split->mids) {
        if (m.dataset) stores[m.prefix] = m.dataset;  // else another producer's (a share)
      }
    }
    return stores;
  }

  std::string DataFacts() const override {
    nlohmann::json data = nlohmann::json::object();
    for (const auto& split : built_.splits) {
      if (!split) continue;
      for (const auto& m : split->mids) {
        if (!m.dataset || data.contains(m.prefix)) continue;  // another producer's: its facts
        char digest[17];
        std::snprintf(digest, sizeof(digest), "%016llx",
                      static_cast<unsigned long long>(m.dataset->index_xxh3()));
        auto bin = io::FileSize(m.prefix + ".bin");
        data[m.prefix] = {{"idx_bytes", m.dataset->index_bytes().size()},
                          {"bin_bytes", bin.ok() ? static_cast<int64_t>(*bin) : -1},
                          {"idx_xxh3", digest}};
      }
    }
    return data.dump();
  }

  OrderView& view() override { return *view_; }

  std::unique_ptr<ImageWriter> TakeImage() override {
    view_.reset();
    return TableImageWriter::Create(std::move(built_));
  }

  Result<std::unique_ptr<ImageWriter>> NodeImage(Split split, std::vector<int64_t> held,
                                                 bool keep_source_index) const override {
    return NodeImageOf(built_, split, std::move(held), keep_source_index);
  }

  BuildPhases Phases() const override {
    BuildPhases p;
    p.open_seconds = built_.seconds_open;
    p.tables_seconds = built_.seconds_tables;
    p.blend_seconds = built_.seconds_blend_build;
    for (const auto& split : built_.splits) {
      if (!split) continue;
      p.blend_bytes += split->blend.dataset_index.size() * sizeof(int32_t) +
                       split->blend.dataset_sample_index.size() * sizeof(int64_t);
    }
    p.threads = static_cast<int>(UsableCpus());
    return p;
  }

  std::vector<int64_t> ShareFacts() const override { return OwnMidFacts(built_); }
  Status AdoptShareFacts(std::span<const int64_t> facts) override {
    GRIDFEED_RETURN_IF_ERROR(AdoptMidFacts(facts, &built_));
    view_ = std::make_unique<MegatronView>(ViewOf(built_), sample_options_, OpenedStores());
    return Status::Ok();
  }
  Result<std::vector<std::byte>> NodeSections(Split split, std::span<const int64_t> held,
                                              int producer) const override {
    return NodeSectionsOf(built_, split, held, producer);
  }
  Result<std::unique_ptr<ImageWriter>> AssembleNodeImage(
      Split split, std::vector<int64_t> held, bool keep_source_index,
      std::vector<std::vector<std::byte>> sections) const override {
    return order::AssembleNodeImage(built_, split, std::move(held), keep_source_index,
                                    std::move(sections));
  }
  void ReleaseShareTables() override {
    view_.reset();
    ReleaseSourceTables(&built_);
  }
  Result<std::vector<std::byte>> WholeSections(int producer) const override {
    return WholeSectionsOf(built_, producer);
  }
  // Every producer's tables back in place (its own included, from its own sections): the
  // image is then TableImageWriter's of one process's whole build.
  Result<std::unique_ptr<ImageWriter>> AssembleWholeImage(
      std::vector<std::vector<std::byte>> sections) override {
    view_.reset();
    GRIDFEED_RETURN_IF_ERROR(AdoptWholeSections(std::move(sections), sample_options_.seq_length,
                                                sample_options_.add_extra_token, &built_));
    return std::unique_ptr<ImageWriter>(TableImageWriter::Create(std::move(built_)));
  }

 private:
  BuiltDatasets built_;
  SampleOptions sample_options_;
  std::unique_ptr<MegatronView> view_;
};

class MegatronPipeline final : public Pipeline {
 public:
  explicit MegatronPipeline(const config::DataOptions& o) : options_(o) {}

  Result<std::unique_ptr<BuiltOrder>> Build() const override {
    GRIDFEED_ASSIGN_OR_RETURN(BuiltDatasets b,
                              BuildMegatronDatasets(options_, /*digest_indexes=*/true));
    return MakeMegatronBuilt(std::move(b), MegatronSampleOptions(options_));
  }

  // Weighted blends of two stores or more, in every split built: each source's tables then
  // depend on its store alone, and the blend on the weights alone.
  Result<std::vector<std::string>> DividedStores() const override {
    GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MegatronDatasetConfig(options_));
    std::vector<std::string> stores;
    auto add = [&](const std::vector<std::string>& tokens, bool per_split) -> Result<bool> {
      GRIDFEED_ASSIGN_OR_RETURN(Blend b, ParseDataPath(tokens));
      if (!b.weights || (per_split && b.prefixes.size() == 1)) return false;
      for (const auto& p : b.prefixes) {
        if (std::find(stores.begin(), stores.end(), p) == stores.end()) stores.push_back(p);
      }
      return true;
    };
    bool divided = true;
    if (c.data_path) {
      GRIDFEED_ASSIGN_OR_RETURN(divided, add(*c.data_path, false));
    } else {
      for (const auto& paths : c.split_paths) {
        if (!paths) continue;
        GRIDFEED_ASSIGN_OR_RETURN(bool d, add(*paths, true));
        divided = divided && d;
      }
    }
    if (!divided || stores.size() < 2) stores.clear();
    return stores;
  }

  Result<std::unique_ptr<BuiltOrder>> BuildShare(
      const std::function<bool(const std::string&)>& builds_store) const override {
    GRIDFEED_ASSIGN_OR_RETURN(BuiltDatasets b, BuildMegatronDatasets(options_, /*digest_indexes=*/
                                                                     true, {}, {}, builds_store));
    return MakeMegatronBuilt(std::move(b), MegatronSampleOptions(options_));
  }

  // Many producers of the whole image: the divided stores, each costing its index bytes.
  Result<std::vector<uint64_t>> WholeShareUnits() const override {
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<std::string> stores, DividedStores());
    std::vector<uint64_t> costs;
    for (const auto& s : stores) {
      const auto bytes = io::FileSize(s + ".idx");  // a missing one fails its producer's open
      costs.push_back(bytes.ok() ? static_cast<uint64_t>(*bytes) : 0);
    }
    return costs;
  }

  Result<std::unique_ptr<BuiltOrder>> BuildWholeShare(
      const std::function<bool(size_t unit)>& builds_unit) const override {
    GRIDFEED_ASSIGN_OR_RETURN(std::vector<std::string> stores, DividedStores());
    if (stores.empty()) {
      return FailedPrecondition("this order's whole image is not divided among producers");
    }
    std::map<std::string, size_t> unit_of;
    for (size_t u = 0; u < stores.size(); ++u) unit_of[stores[u]] = u;
    return BuildShare([&](const std::string& prefix) {
      const auto it = unit_of.find(prefix);
      return it != unit_of.end() && builds_unit(it->second);
    });
  }

  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    return ViewMegatronImage(image, MegatronSampleOptions(options_));
  }
  FieldSchema schema() const override { return GptSchema(options_.create_attention_mask); }

 private:
  config::DataOptions options_;
};

}  // namespace

SampleRecord MegatronWindow(const OrderView& view, Split split, int64_t position,
                            std::vector<int64_t>* window) {
  const auto* megatron = dynamic_cast<const MegatronView*>(&view);
  GRIDFEED_CHECK(megatron != nullptr);
  return megatron->Window(split, position, window);
}

std::unique_ptr<BuiltOrder> MakeMegatronBuilt(BuiltDatasets built, SampleOptions sample_options) {
  return std::make_unique<MegatronBuilt>(std::move(built), sample_options);
}

Result<std::unique_ptr<OrderView>> ViewMegatronImage(std::span<const std::byte> image,
                                                     SampleOptions sample_options) {
  GRIDFEED_ASSIGN_OR_RETURN(TableView view, ParseTableImage(image));
  return std::unique_ptr<OrderView>(
      std::make_unique<MegatronView>(std::move(view), sample_options, Stores{}));
}

std::unique_ptr<Pipeline> MakeMegatronPipeline(const config::DataOptions& options) {
  return std::make_unique<MegatronPipeline>(options);
}

Result<DatasetConfig> MegatronDatasetConfig(const config::DataOptions& o) {
  DatasetConfig c;
  if (!o.data_path.empty()) c.data_path = o.data_path;
  if (!o.train_data_path.empty()) c.split_paths[0] = o.train_data_path;
  if (!o.valid_data_path.empty()) c.split_paths[1] = o.valid_data_path;
  if (!o.test_data_path.empty()) c.split_paths[2] = o.test_data_path;
  if (!o.split.empty()) c.split = o.split;
  const char* names[3] = {"--train-samples", "--valid-samples", "--test-samples"};
  const std::string* values[3] = {&o.train_samples, &o.valid_samples, &o.test_samples};
  for (int i = 0; i < 3; ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, config::ParseSampleCount(names[i], *values[i]));
    if (n >= 0) c.sizes[i] = n;
  }
  c.seed = static_cast<uint32_t>(o.seed);  // range checked by config::Validate
  c.seq_length = o.seq_length;
  c.eod_id = o.eod_id;
  c.pad_id = o.pad_id;
  c.add_extra_token = !o.no_add_extra_token;
  c.drop_last_partial_validation_sequence = !o.no_drop_last_partial_validation_sequence;
  c.mid_level_dataset_surplus = o.mid_level_dataset_surplus;
  c.sequences_per_dataset = o.sequences_per_dataset;
  c.sequences_path = o.per_dataset_sequences_path;
  return c;
}

SampleOptions MegatronSampleOptions(const config::DataOptions& o) {
  SampleOptions s;
  s.seq_length = o.seq_length;
  s.add_extra_token = !o.no_add_extra_token;
  s.eod_id = o.eod_id;
  s.pad_id = PadIdUsed(o.pad_id, o.eod_id);
  s.reset_position_ids = o.reset_position_ids;
  s.reset_attention_mask = o.reset_attention_mask;
  s.eod_mask_loss = o.eod_mask_loss;
  s.create_attention_mask = o.create_attention_mask;
  return s;
}

Result<BuiltDatasets> BuildMegatronDatasets(const config::DataOptions& o, bool digest_indexes,
                                            decltype(DatasetConfig::on_mid_built) on_mid_built,
                                            decltype(DatasetConfig::on_table_final) on_table_final,
                                            decltype(DatasetConfig::builds_store) builds_store) {
  config::JobOptions job;
  job.data = o;
  GRIDFEED_RETURN_IF_ERROR(config::Validate(job));
  GRIDFEED_ASSIGN_OR_RETURN(DatasetConfig c, MegatronDatasetConfig(o));
  c.digest_indexes = digest_indexes;
  c.on_mid_built = std::move(on_mid_built);
  c.on_table_final = std::move(on_table_final);
  c.builds_store = std::move(builds_store);
  GRIDFEED_ASSIGN_OR_RETURN(BuiltDatasets b, BuildDatasets(c));
  for (const auto& w : b.warnings) log::Warn(w);
  double doc = 0, sample = 0, shuffle = 0;
  for (const auto& s : b.splits) {
    if (!s) continue;
    for (const auto& m : s->mids) {
      doc += m.times.document_index;
      sample += m.times.sample_index;
      shuffle += m.times.shuffle_index;
    }
  }
  // Phase times for whoever profiles the start-up (GRIDFEED_LOG_LEVEL=DEBUG), not on every
  // command's output.
  if (!log::Enabled(log::Level::kDebug)) return b;
  char line[384];
  std::snprintf(line, sizeof(line),
                "tables built: open %.3f s, tables %.3f s (document_index %.3f, sample_index %.3f, "
                "shuffle_index %.3f, summed over datasets; index checks beside them %.3f s), "
                "blend %.3f s (weighted blends built beside them: %.3f s)",
                b.seconds_open, b.seconds_tables, doc, sample, shuffle, b.seconds_checks_beside,
                b.seconds_blend, b.seconds_blend_build);
  log::Debug(line);
  return b;
}

}  // namespace gridfeed::order
