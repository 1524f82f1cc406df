#include "gridfeed/order/sft/sft_pipeline.h"

#include <xxhash.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "gridfeed/config/tokenizer_options.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/sft/sft_dataset.h"
#include "gridfeed/order/sft/thd.h"

namespace gridfeed::order::sft {
namespace {

constexpr char kMagic[8] = {'G', 'F', 'S', 'F', 'T', 'I', 'M', '1'};
constexpr size_t kMaxImageText = size_t{64} << 20;  // bounds a damaged length field

std::string Hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// What the image carries and the canonical text holds: every file's size and rows and the
// tokenizer's digest.
nlohmann::json FactsOfDataset(const SftDataset& ds, const config::JobOptions& o) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& path : ds.paths()) {
    const JsonlRows& f = ds.file(path);
    const StoreFacts s = FactsOf(path, {}, f.bytes(), 0);
    files.push_back({{"path", path},
                     {"bytes", f.bytes().size()},
                     {"rows", f.size()},
                     {"sampled_xxh3", Hex(s.data_sample_xxh3)}});
  }
  (void)o;  // the CP size packing pads for is a data option (in the canonical text already)
  return {{"sft_files", files}, {"sft_tokenizer_xxh3", Hex(ds.tokenizer_digest())}};
}

class SftView final : public OrderView {
 public:
  SftView(const config::JobOptions& options, nlohmann::json facts)
      : options_(options), facts_(std::move(facts)) {
    auto files = SftFiles(options.data);  // valid: the options were checked on rank 0's build
    if (files.ok()) stores_ = std::move(files).value();
  }
  SftView(const config::JobOptions& options, nlohmann::json facts,
          std::shared_ptr<const SftDataset> ds)
      : SftView(options, std::move(facts)) {
    ds_ = std::move(ds);
  }

  int64_t length(Split split) const override {
    if (ds_) return ds_->length(split);
    const auto& l = facts_.at("lengths");
    return l.at(static_cast<int>(split)).get<int64_t>();
  }
  const std::vector<std::string>& token_stores() const override { return stores_; }
  std::vector<std::string> TokenFiles() const override {
    std::vector<std::string> f = stores_;
    for (auto& t : config::TokenizerFiles(options_.data)) f.push_back(std::move(t));
    return f;
  }

  Status OpenTokenStores(bool) override {
    if (ds_) return Status::Ok();
    GRIDFEED_ASSIGN_OR_RETURN(auto ds, SftDataset::Open(options_));
    const nlohmann::json mine = FactsOfDataset(*ds, options_);
    for (const auto& want : facts_.at("facts").at("sft_files")) {
      const std::string path = want.at("path").get<std::string>();
      for (const auto& have : mine.at("sft_files")) {
        if (have.at("path") != path) continue;
        if (have != want) {
          return DataLoss("SFT file '" + path + "' differs from the one world rank 0 read (" +
                          have.dump() + " here, " + want.dump() + " there)");
        }
      }
    }
    if (mine.at("sft_tokenizer_xxh3") != facts_.at("facts").at("sft_tokenizer_xxh3")) {
      return DataLoss("the tokenizer " + ds->tokenizer().path() +
                      " differs from the one world rank 0 read");
    }
    ds_ = std::move(ds);
    return Status::Ok();
  }

  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    std::vector<StoreFacts> out;
    if (!ds_) return out;
    for (const auto& path : ds_->paths())
      out.push_back(FactsOf(path, {}, ds_->file(path).bytes(), salt));
    return out;
  }

  SampleRecord Read(Split split, int64_t position, Sample* out, bool hash_tokens) const override {
    SftSource source;
    auto s = ds_->Read(split, position, &source);
    if (!s.ok()) throw std::runtime_error(s.status().ToString());
    out->tokens = std::move(s->tokens);
    out->labels = std::move(s->labels);
    out->loss_mask = std::move(s->loss_mask);
    out->position_ids = std::move(s->position_ids);
    out->attention_mask.clear();
    out->cu_seqlens = std::move(s->cu_seqlens);
    out->max_seqlen = s->max_seqlen;
    return Record(split, position, source, hash_tokens ? &out->tokens : nullptr);
  }

  bool packed() const override { return true; }

  Status ReadPacked(Split split, std::span<const int64_t> positions, const PackedTargets& out,
                    bool hash_tokens, std::vector<SampleRecord>* records) const override {
    const int64_t L = ds_->seq_length();
    PackedMicroBatch b;
    b.mbs = static_cast<int64_t>(positions.size());
    b.seq_length = L;
    b.cu_width = L + 1;
    for (int64_t p : positions) {
      SftSource source;
      GRIDFEED_ASSIGN_OR_RETURN(PackedSample s, ds_->Read(split, p, &source));
      records->push_back(Record(split, p, source, hash_tokens ? &s.tokens : nullptr));
      b.tokens.insert(b.tokens.end(), s.tokens.begin(), s.tokens.end());
      b.labels.insert(b.labels.end(), s.labels.begin(), s.labels.end());
      b.loss_mask.insert(b.loss_mask.end(), s.loss_mask.begin(), s.loss_mask.end());
      b.position_ids.insert(b.position_ids.end(), s.position_ids.begin(), s.position_ids.end());
      b.cu_seqlens.insert(b.cu_seqlens.end(), s.cu_seqlens.begin(), s.cu_seqlens.end());
      b.max_seqlen.push_back(s.max_seqlen);
    }
    PackedMicroBatch flat = FlattenPacked(b);
    if (out.cp_size > 1) {
      GRIDFEED_ASSIGN_OR_RETURN(flat, SliceForCpRank(flat, out.cp_size, out.cp_rank));
    }
    auto put = [](auto* dst, const auto& v) {
      if (dst) std::memcpy(dst, v.data(), v.size() * sizeof(v[0]));
    };
    put(out.tokens, flat.tokens);
    put(out.position_ids, flat.position_ids);
    put(out.labels, flat.labels);
    put(out.loss_mask, flat.loss_mask);
    if (static_cast<int64_t>(flat.cu_seqlens.size()) > out.cu_capacity) {
      return Internal("merged cu_seqlens exceed the payload's room");
    }
    put(out.cu_seqlens, flat.cu_seqlens);
    if (out.num_cu_seqlens) *out.num_cu_seqlens = static_cast<int64_t>(flat.cu_seqlens.size());
    if (out.max_seqlen) *out.max_seqlen = flat.max_seqlen.empty() ? 0 : flat.max_seqlen[0];
    return Status::Ok();
  }

  bool is_blend(Split split) const override { return ds_ && ds_->is_blend(split); }
  int SourceOf(Split split, int64_t position) const override {
    return ds_ ? ds_->Locate(split, position).dataset : 0;
  }
  std::vector<SourceInfo> Sources(Split split) const override {
    std::vector<SourceInfo> out;
    if (!ds_) return out;
    const auto& s = ds_->layout().splits[static_cast<int>(split)];
    if (!s) return out;
    for (size_t k = 0; k < s->mids.size(); ++k) {
      SourceInfo info;
      info.name = s->mids[k].path;
      info.weight = s->blended ? s->weights[k] : 1.0;
      info.samples_per_epoch = s->mids[k].end - s->mids[k].begin;  // a pass over its rows
      out.push_back(info);
    }
    return out;
  }

 private:
  SampleRecord Record(Split split, int64_t position, const SftSource& source,
                      const std::vector<int64_t>* tokens) const {
    SampleRecord r;
    r.position = position;
    r.dataset = source.dataset;
    const auto& s = ds_->layout().splits[static_cast<int>(split)];
    r.dataset_sample =
        s->blended ? s->blend.dataset_sample_index[static_cast<size_t>(position)] : position;
    r.first_document = source.row;  // the JSON Lines row the sample packs
    r.first_offset = 0;
    if (tokens) r.token_xxh3 = XXH3_64bits(tokens->data(), tokens->size() * sizeof(int64_t));
    return r;
  }

  config::JobOptions options_;
  nlohmann::json facts_;  // {"facts": ..., "lengths": [...]} (from the image)
  std::vector<std::string> stores_;
  std::shared_ptr<const SftDataset> ds_;
};

class SftImageWriter final : public ImageWriter {
 public:
  explicit SftImageWriter(std::string text) : text_(std::move(text)) {}
  size_t size() const override { return 16 + text_.size(); }
  void WriteTo(std::byte* dst) override {
    const uint64_t n = text_.size();
    std::memcpy(dst, kMagic, 8);
    std::memcpy(dst + 8, &n, 8);
    std::memcpy(dst + 16, text_.data(), text_.size());
  }

 private:
  std::string text_;
};

class SftBuilt final : public BuiltOrder {
 public:
  SftBuilt(const config::JobOptions& o, std::shared_ptr<const SftDataset> ds) {
    const nlohmann::json facts = FactsOfDataset(*ds, o);
    facts_ = facts.dump();
    image_ = nlohmann::json{
        {"facts", facts},
        {"lengths",
         {ds->length(Split::kTrain), ds->length(Split::kValid), ds->length(Split::kTest)}}};
    view_ = std::make_unique<SftView>(o, image_, std::move(ds));
  }
  std::string DataFacts() const override { return facts_; }
  OrderView& view() override { return *view_; }
  std::unique_ptr<ImageWriter> TakeImage() override {
    view_.reset();
    return std::make_unique<SftImageWriter>(image_.dump());
  }

 private:
  std::string facts_;
  nlohmann::json image_;
  std::unique_ptr<SftView> view_;
};

class SftPipeline final : public Pipeline {
 public:
  explicit SftPipeline(const config::JobOptions& o) : options_(o) {}

  Result<std::unique_ptr<BuiltOrder>> Build() const override {
    Stopwatch clock;
    GRIDFEED_ASSIGN_OR_RETURN(auto ds, SftDataset::Open(options_));
    for (const auto& w : ds->layout().warnings) log::Warn(w);
    log::Info("SFT order: " + std::to_string(ds->paths().size()) + " JSON Lines file(s), splits " +
              std::to_string(ds->length(Split::kTrain)) + "/" +
              std::to_string(ds->length(Split::kValid)) + "/" +
              std::to_string(ds->length(Split::kTest)) + " packed samples of " +
              std::to_string(ds->seq_length()) + " tokens; " + std::to_string(clock.Seconds()) +
              " s");
    return std::unique_ptr<BuiltOrder>(
        new SftBuilt(options_, std::shared_ptr<const SftDataset>(std::move(ds))));
  }

  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    uint64_t n = 0;
    if (image.size() < 16 || std::memcmp(image.data(), kMagic, 8) != 0) {
      return DataLoss("not an SFT order image");
    }
    std::memcpy(&n, image.data() + 8, 8);
    if (n > kMaxImageText || n != image.size() - 16) return DataLoss("SFT order image: bad size");
    auto j =
        nlohmann::json::parse(reinterpret_cast<const char*>(image.data()) + 16,
                              reinterpret_cast<const char*>(image.data()) + 16 + n, nullptr, false);
    if (j.is_discarded() || !j.contains("facts") || !j.contains("lengths") ||
        !j["lengths"].is_array() || j["lengths"].size() != 3) {
      return DataLoss("SFT order image: malformed");
    }
    return std::unique_ptr<OrderView>(new SftView(options_, std::move(j)));
  }
  FieldSchema schema() const override { return PackedSchema(); }

 private:
  config::JobOptions options_;
};

}  // namespace

std::unique_ptr<Pipeline> MakeSftPipeline(const config::JobOptions& options) {
  return std::make_unique<SftPipeline>(options);
}

}  // namespace gridfeed::order::sft
