#include "gridfeed/order/fim/fim_pipeline.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "gridfeed/order/fim/fim_dataset.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"

namespace gridfeed::order::fim {
namespace {

class FimView final : public OrderView {
 public:
  // `inner` is Megatron's view of the same tables; owned when `owned` is set.
  FimView(const OrderView* inner, std::unique_ptr<OrderView> owned,
          std::shared_ptr<const FimSetup> setup)
      : inner_(owned ? owned.get() : inner), owned_(std::move(owned)), setup_(std::move(setup)) {
    workers_ = std::max<int64_t>(setup_->gpt.num_workers, 1);
  }

  int64_t length(Split split) const override { return inner_->length(split); }
  const std::vector<std::string>& token_stores() const override { return inner_->token_stores(); }
  std::vector<std::string> TokenFiles() const override { return inner_->TokenFiles(); }
  Status OpenTokenStores(bool checked_on_node) override {
    return owned_ ? owned_->OpenTokenStores(checked_on_node) : Status::Ok();
  }
  void AdoptTokenStores(const OpenStores& stores) override {
    if (owned_) owned_->AdoptTokenStores(stores);
  }
  // The token stores' facts and the tokenizer's: a reader with another tokenizer file under
  // the same path would decode and re-encode otherwise.
  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    std::vector<StoreFacts> facts = inner_->TokenStoreFacts(salt);
    facts.push_back(TokenizerFacts());
    return facts;
  }
  // The tokenizer is no token file: its facts are this reader's own (known, no reads).
  std::vector<StoreFacts> FactsOfRank0Files(
      uint64_t salt, const std::vector<StoreFacts>& reference) const override {
    (void)salt;
    std::vector<StoreFacts> facts = reference;
    if (!facts.empty()) facts.back() = TokenizerFacts();
    return facts;
  }

  SampleRecord Read(Split split, int64_t position, Sample* out, bool hash_tokens) const override {
    SampleRecord r = MegatronWindow(*inner_, split, position, &window_);
    FimRandom* rng = Stream(split, static_cast<size_t>(r.dataset));
    Status st = FimSample(*setup_, window_, rng, out);
    if (!st.ok()) {
      // Only the tokenizer fails (text it cannot decode or encode): the feeder turns this into
      // the reader's read error.
      const std::vector<SourceInfo> sources = inner_->Sources(split);
      const std::string store = static_cast<size_t>(r.dataset) < sources.size()
                                    ? sources[static_cast<size_t>(r.dataset)].name
                                    : "source " + std::to_string(r.dataset);
      throw std::runtime_error(
          FimSampleError(st, split, position, store, r.dataset_sample).message());
    }
    if (hash_tokens) r.token_xxh3 = TokenDigest(out->tokens);
    return r;
  }

  // The whole sample is rearranged once (its draws consumed once), then sliced.
  SampleRecord ReadFields(Split split, int64_t position, const FieldTargets& out, bool hash_tokens,
                          AssemblyScratch* scratch) const override {
    SampleRecord r = Read(split, position, &scratch->sample, hash_tokens);
    SliceFields(scratch->sample, setup_->sample_options.seq_length, out);
    return r;
  }

  bool fetch_ordered() const override { return true; }
  void BeginMicroBatch(int64_t k) const override {
    if (k == 0) {
      for (auto& s : streams_) s.clear();  // a new walk: fresh streams, as a new DataLoader
    }
    worker_ = setup_->gpt.num_workers > 0 ? static_cast<size_t>(k % workers_) : 0;
  }

  bool is_blend(Split split) const override { return inner_->is_blend(split); }
  int SourceOf(Split split, int64_t position) const override {
    return inner_->SourceOf(split, position);
  }
  std::vector<SourceInfo> Sources(Split split) const override { return inner_->Sources(split); }

 private:
  StoreFacts TokenizerFacts() const {
    StoreFacts t;
    t.name = "tokenizer " + setup_->tokenizer->path();
    t.index_xxh3 = setup_->tokenizer_xxh3;
    t.data_bytes = static_cast<uint64_t>(setup_->tokenizer_bytes);
    return t;
  }

  FimRandom* Stream(Split split, size_t source) const {
    auto& per_worker = streams_[static_cast<int>(split)];
    if (per_worker.size() < static_cast<size_t>(workers_)) per_worker.resize(workers_);
    auto& per_source = per_worker[worker_];
    if (per_source.size() <= source) per_source.resize(source + 1);
    if (!per_source[source]) per_source[source] = std::make_unique<FimRandom>(setup_->seed);
    return per_source[source].get();
  }

  const OrderView* inner_;
  std::unique_ptr<OrderView> owned_;
  std::shared_ptr<const FimSetup> setup_;
  int64_t workers_ = 1;
  // Fetch-ordered state (one thread at a time, pipeline.h): per split, worker and source.
  mutable std::array<std::vector<std::vector<std::unique_ptr<FimRandom>>>, 3> streams_;
  mutable size_t worker_ = 0;
  mutable std::vector<int64_t> window_;
};

class FimBuilt final : public BuiltOrder {
 public:
  FimBuilt(std::unique_ptr<BuiltOrder> inner, std::shared_ptr<const FimSetup> setup)
      : inner_(std::move(inner)), view_(&inner_->view(), nullptr, setup), setup_(setup) {}
  std::string DataFacts() const override {
    nlohmann::json j = {{"gpt", nlohmann::json::parse(inner_->DataFacts(), nullptr, false)},
                        {"fim_tokenizer_xxh3", setup_->tokenizer_xxh3}};
    return j.dump();
  }
  OrderView& view() override { return view_; }
  OpenStores OpenedStores() const override { return inner_->OpenedStores(); }
  std::unique_ptr<ImageWriter> TakeImage() override { return inner_->TakeImage(); }

 private:
  std::unique_ptr<BuiltOrder> inner_;
  FimView view_;
  std::shared_ptr<const FimSetup> setup_;
};

class FimPipeline final : public Pipeline {
 public:
  explicit FimPipeline(const config::JobOptions& o) : options_(o) {}

  Result<std::unique_ptr<BuiltOrder>> Build() const override {
    GRIDFEED_ASSIGN_OR_RETURN(auto setup, Setup());
    GRIDFEED_ASSIGN_OR_RETURN(BuiltDatasets b,
                              BuildMegatronDatasets(setup->gpt, /*digest_indexes=*/true));
    return std::unique_ptr<BuiltOrder>(
        new FimBuilt(MakeMegatronBuilt(std::move(b), setup->sample_options), setup));
  }
  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    GRIDFEED_ASSIGN_OR_RETURN(auto setup, Setup());
    GRIDFEED_ASSIGN_OR_RETURN(auto inner, ViewMegatronImage(image, setup->sample_options));
    return std::unique_ptr<OrderView>(new FimView(nullptr, std::move(inner), setup));
  }
  FieldSchema schema() const override { return GptSchema(options_.data.create_attention_mask); }

 private:
  Result<std::shared_ptr<const FimSetup>> Setup() const {
    GRIDFEED_ASSIGN_OR_RETURN(FimSetup setup, OpenFimSetup(options_));
    return std::make_shared<const FimSetup>(std::move(setup));
  }
  config::JobOptions options_;
};

}  // namespace

std::unique_ptr<Pipeline> MakeFimPipeline(const config::JobOptions& options) {
  return std::make_unique<FimPipeline>(options);
}

}  // namespace gridfeed::order::fim
