#include "gridfeed/order/olmo/olmo_pipeline.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "gridfeed/config/olmo_yaml.h"
#include "gridfeed/core/check.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/order/olmo/olmo_instance.h"
#include "gridfeed/order/olmo/olmo_plan.h"
#include "gridfeed/order/sections.h"
#include "gridfeed/order/store_facts.h"

namespace gridfeed::order {
namespace {

constexpr uint64_t kImageMagic = 0x314f4d4c4f464755ull;  // "UGFOLMO1" little-endian
constexpr int64_t kImageVersion = 2;
// Header words after magic and version (see HeaderOf).
constexpr int kHeaderWords = 13;

int TokenSize(const config::DataOptions& d) { return OlmoTokenSize(d); }

OlmoItemOptions ItemOptions(const config::DataOptions& d) {
  OlmoItemOptions o = OlmoItemOptionsOf(d);
  o.generate_doc_lengths = false;  // lengths are not part of a fed sample
  return o;
}

class OlmoView final : public OrderView {
 public:
  // `perms`: one permutation of N per epoch, alive as long as this view.
  OlmoView(const config::JobOptions& options, OlmoPlan plan,
           std::vector<std::span<const uint32_t>> perms)
      : data_(options.data),
        plan_(std::move(plan)),
        positions_(plan_),
        perms_(std::move(perms)),
        item_options_(ItemOptions(data_)) {}

  void AdoptFiles(io::OlmoTokenFiles files) { files_ = std::move(files), open_ = true; }
  // The permutations are gone (a share's, released): every read is then a bug (InstanceAt).
  void ForgetPermutations() {
    for (auto& perm : perms_) perm = {};
  }

  int64_t length(Split split) const override { return split == Split::kTrain ? plan_.length : 0; }
  const std::vector<std::string>& token_stores() const override { return data_.olmo_paths; }

  std::vector<std::string> TokenFiles() const override {
    std::vector<std::string> files = data_.olmo_paths;
    files.insert(files.end(), data_.olmo_label_mask_paths.begin(),
                 data_.olmo_label_mask_paths.end());
    return files;
  }

  Status OpenTokenStores(bool) override {  // nothing per element to check
    if (open_) return Status::Ok();
    GRIDFEED_ASSIGN_OR_RETURN(
        io::OlmoTokenFiles files,
        io::OlmoTokenFiles::Open(data_.olmo_paths, data_.olmo_label_mask_paths, TokenSize(data_),
                                 data_.seq_length));
    for (size_t k = 0; k < plan_.files.size(); ++k) {
      const auto& have = files.files()[k];
      if (have.instances != plan_.files[k].instances) {
        return DataLoss("OLMo token file '" + have.path + "' holds " +
                        std::to_string(have.instances) + " instances here, " +
                        std::to_string(plan_.files[k].instances) +
                        " when the tables were built (the file changed)");
      }
    }
    AdoptFiles(std::move(files));
    return Status::Ok();
  }

  std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const override {
    std::vector<StoreFacts> out;
    if (!open_) return out;
    for (size_t k = 0; k < data_.olmo_paths.size(); ++k) {
      out.push_back(FactsOf(data_.olmo_paths[k], {}, files_.bytes(k), salt));
    }
    return out;
  }

  int64_t SampleIndex(Split, int64_t position) const override { return InstanceAt(position); }

  SampleRecord Read(Split, int64_t position, Sample* out, bool hash_tokens) const override {
    const int64_t instance = InstanceAt(position);
    const int64_t L = data_.seq_length;
    auto item = GetOlmoItem(files_, instance, item_options_);
    // The instance exists (position < length, files checked at open): GetOlmoItem cannot fail.
    GRIDFEED_CHECK(item.ok());
    const OlmoItem& it = *item;
    out->tokens = it.input_ids;
    out->position_ids.resize(L);
    out->labels.resize(L);
    out->loss_mask.resize(L);
    const bool kept = !it.instance_mask.has_value() || *it.instance_mask;
    // OLMo's labels: input_ids shifted by one, -100 where the label mask is 0, the input is
    // the pad id (attention mask) or the instance failed the filter; the last has no label.
    for (int64_t i = 0; i < L; ++i) {
      out->position_ids[i] = i;
      if (i + 1 < L) {
        const size_t m = static_cast<size_t>(i + 1);
        const bool keep = kept && (it.label_mask.empty() || it.label_mask[m] != 0) &&
                          (it.attention_mask.empty() || it.attention_mask[m] != 0);
        out->labels[i] = it.input_ids[m];
        out->loss_mask[i] = keep ? 1.0f : 0.0f;
      } else {
        out->labels[i] = std::max<int64_t>(0, data_.pad_id);
        out->loss_mask[i] = 0.0f;
      }
    }
    out->attention_mask.clear();
    SampleRecord r;
    r.position = position;
    const int file = files_.FileOf(instance);
    r.dataset = plan_.file_source[static_cast<size_t>(file)];
    r.dataset_sample = instance;
    r.first_document = file;
    r.first_offset = (instance - plan_.files[static_cast<size_t>(file)].start) * L;
    if (hash_tokens) {
      r.token_xxh3 = XXH3_64bits(out->tokens.data(), out->tokens.size() * sizeof(int64_t));
    }
    return r;
  }

  // OLMo's trainer state: the epoch and global_train_examples_seen_this_epoch (its restart
  // start_index), as they follow from the consumed positions (whole steps per DP rank).
  std::string DescribeCursor(Split, int64_t consumed) const override {
    const int64_t per_epoch = plan_.epoch_stream * plan_.world_size;
    const int64_t epoch = consumed / per_epoch;
    return nlohmann::json{{"pipeline", "olmo"},
                          {"epoch", plan_.first_epoch + epoch},
                          {"instances_seen_this_epoch", consumed - epoch * per_epoch},
                          {"world_size", plan_.world_size}}
        .dump();
  }

  bool is_blend(Split) const override { return plan_.source_names.size() > 1; }

  int SourceOf(Split, int64_t position) const override {
    return plan_.file_source[static_cast<size_t>(FileOfInstance(InstanceAt(position)))];
  }

  std::vector<SourceInfo> Sources(Split split) const override {
    std::vector<SourceInfo> out;
    if (split != Split::kTrain) return out;
    for (const auto& name : plan_.source_names) out.push_back({name, 0.0, 0});
    for (size_t k = 0; k < plan_.files.size(); ++k) {
      out[static_cast<size_t>(plan_.file_source[k])].samples_per_epoch += plan_.files[k].instances;
    }
    for (auto& s : out) {
      s.weight = static_cast<double>(s.samples_per_epoch) / static_cast<double>(plan_.instances);
    }
    return out;
  }

 private:
  int64_t InstanceAt(int64_t position) const {
    const OlmoSlot slot = positions_.Locate(position);
    GRIDFEED_CHECK(slot.epoch >= 0 && static_cast<size_t>(slot.epoch) < perms_.size());
    const auto& perm = perms_[static_cast<size_t>(slot.epoch)];
    // A share of a whole-image build holds only its own epochs (the others are empty).
    GRIDFEED_CHECK(static_cast<int64_t>(perm.size()) == plan_.instances);
    const int64_t instance = perm[static_cast<size_t>(slot.global_index % plan_.instances)];
    GRIDFEED_CHECK(instance < plan_.instances);
    return instance;
  }
  // The last file whose range holds the instance (as OLMo's scan), without the files open.
  int FileOfInstance(int64_t instance) const {
    int found = 0;
    for (size_t k = 0; k < plan_.files.size(); ++k) {
      const auto& f = plan_.files[k];
      if (f.start <= instance && instance < f.start + f.instances) found = static_cast<int>(k);
    }
    return found;
  }

  config::DataOptions data_;
  OlmoPlan plan_;
  OlmoPositions positions_;
  std::vector<std::span<const uint32_t>> perms_;
  OlmoItemOptions item_options_;
  io::OlmoTokenFiles files_;
  bool open_ = false;
};

// Header: magic, version, then the plan's numbers; then per file (start, instances); then the
// permutations, one of N uint32 per epoch (8-byte aligned).
std::vector<int64_t> HeaderOf(const OlmoPlan& p) {
  std::vector<int64_t> h = {static_cast<int64_t>(kImageMagic),
                            kImageVersion,
                            p.instances,
                            p.world_size,
                            p.global_batch_size,
                            p.micro_batch_size,
                            p.num_workers,
                            p.drop_last ? 1 : 0,
                            p.first_epoch,
                            p.epochs,
                            p.length,
                            static_cast<int64_t>(p.files.size()),
                            p.epoch_stream,
                            p.sizes.total_size,
                            p.restart};
  for (const auto& f : p.files) {
    h.push_back(f.start);
    h.push_back(f.instances);
  }
  return h;
}

size_t PermBytes(const OlmoPlan& p) {
  return (static_cast<size_t>(p.instances) * sizeof(uint32_t) + 7) / 8 * 8;
}

class OlmoImageWriter final : public ImageWriter {
 public:
  OlmoImageWriter(OlmoPlan plan, std::vector<std::vector<uint32_t>> perms)
      : plan_(std::move(plan)), perms_(std::move(perms)) {}
  size_t size() const override {
    return HeaderOf(plan_).size() * sizeof(int64_t) + perms_.size() * PermBytes(plan_);
  }
  void WriteTo(std::byte* dst) override {
    const auto h = HeaderOf(plan_);
    std::memcpy(dst, h.data(), h.size() * sizeof(int64_t));
    dst += h.size() * sizeof(int64_t);
    for (auto& perm : perms_) {
      std::memset(dst, 0, PermBytes(plan_));
      std::memcpy(dst, perm.data(), perm.size() * sizeof(uint32_t));
      dst += PermBytes(plan_);
      std::vector<uint32_t>().swap(perm);  // freed once written
    }
  }

 private:
  OlmoPlan plan_;
  std::vector<std::vector<uint32_t>> perms_;
};

// Tables built in process: every epoch's permutation, or, for a share of a whole-image build
// by several producers (Pipeline::BuildWholeShare), only the epochs `owned` names (the others
// empty, never allocated). A share's view answers length(); reads need the whole build.
class OlmoBuilt final : public BuiltOrder {
 public:
  OlmoBuilt(const config::JobOptions& options, OlmoPlan plan,
            std::vector<std::vector<uint32_t>> perms, io::OlmoTokenFiles files,
            std::vector<char> owned = {})
      : plan_(plan), perms_(std::move(perms)), owned_(std::move(owned)) {
    std::vector<std::span<const uint32_t>> spans(perms_.begin(), perms_.end());
    view_ = std::make_unique<OlmoView>(options, std::move(plan), std::move(spans));
    facts_ = FactsJson(options, files);
    view_->AdoptFiles(std::move(files));
  }
  std::string DataFacts() const override { return facts_; }
  OrderView& view() override { return *view_; }
  std::unique_ptr<ImageWriter> TakeImage() override {
    GRIDFEED_CHECK(owned_.empty());  // a share's image is AssembleWholeImage's
    view_.reset();
    return std::make_unique<OlmoImageWriter>(std::move(plan_), std::move(perms_));
  }

  // What every producer of a whole image must agree on: the order's shape and the data facts
  // (the token files' sizes and sampled digests, as this producer opened them).
  std::vector<int64_t> ShareFacts() const override {
    return {kShareFactsTag, plan_.epochs, plan_.instances, plan_.length,
            static_cast<int64_t>(XXH3_64bits(facts_.data(), facts_.size()))};
  }
  Status AdoptShareFacts(std::span<const int64_t> facts) override {
    if (owned_.empty()) return FailedPrecondition("not a share of a whole-image build");
    const std::vector<int64_t> mine = ShareFacts();
    if (facts.empty() || facts.size() % mine.size() != 0) {
      return DataLoss("the OLMo producers' facts are malformed (" + std::to_string(facts.size()) +
                      " words)");
    }
    for (size_t p = 0; p < facts.size() / mine.size(); ++p) {
      const auto theirs = facts.subspan(p * mine.size(), mine.size());
      if (theirs[0] != kShareFactsTag) {
        return DataLoss("table producer " + std::to_string(p) + "'s facts are not an OLMo order's");
      }
      if (!std::equal(theirs.begin(), theirs.end(), mine.begin())) {
        return DataLoss("table producer " + std::to_string(p) + " sees another OLMo order (" +
                        std::to_string(theirs[1]) + " epochs of " + std::to_string(theirs[2]) +
                        " instances, or other token files) than this one (" +
                        std::to_string(plan_.epochs) + " epochs of " +
                        std::to_string(plan_.instances) + " instances): its token files differ");
      }
    }
    return Status::Ok();
  }

  // A share's own permutations once its sections are cut (they travel in them); its view
  // still answers length().
  void ReleaseShareTables() override {
    if (owned_.empty()) return;
    view_->ForgetPermutations();
    for (auto& perm : perms_) std::vector<uint32_t>().swap(perm);
    released_ = true;
  }

  // Each owned epoch: its index, its length and its permutation.
  Result<std::vector<std::byte>> WholeSections(int producer) const override {
    if (owned_.empty()) return FailedPrecondition("not a share of a whole-image build");
    if (released_) return FailedPrecondition("this share's permutations are released already");
    SectionWriter out(producer);
    for (size_t e = 0; e < perms_.size(); ++e) {
      if (!owned_[e]) continue;
      out.Begin();
      out.PutWord(e);
      out.PutWord(perms_[e].size());
      out.Put(std::span<const uint32_t>(perms_[e]));
    }
    return std::move(out).Seal();
  }

  Result<std::unique_ptr<ImageWriter>> AssembleWholeImage(
      std::vector<std::vector<std::byte>> sections) override {
    if (owned_.empty()) return FailedPrecondition("not a share of a whole-image build");
    // Spent: the permutations come from the sections, this share's own included.
    view_->ForgetPermutations();
    const size_t epochs = static_cast<size_t>(plan_.epochs);
    std::vector<std::vector<uint32_t>>(epochs).swap(perms_);
    std::vector<int> from(epochs, -1);
    const uint64_t n = static_cast<uint64_t>(plan_.instances);
    for (size_t s = 0; s < sections.size(); ++s) {
      const std::vector<std::byte> bytes = std::move(sections[s]);  // freed after this producer's
      GRIDFEED_ASSIGN_OR_RETURN(
          SectionReader r,
          SectionReader::Open(std::span<const std::byte>(bytes), static_cast<int>(s)));
      const std::string& who = r.who();
      for (uint64_t c = 0; c < r.count(); ++c) {
        uint64_t e = 0, len = 0;
        if (!r.Word(&e) || !r.Word(&len)) return DataLoss(who + ": truncated");
        if (e >= epochs || from[e] >= 0) {
          return DataLoss(
              who + ": epoch " + std::to_string(e) + " unknown or given twice" +
              (e < epochs ? " (also by producer " + std::to_string(from[e]) + ")" : std::string()));
        }
        from[e] = static_cast<int>(s);
        if (len != n) {
          return DataLoss(who + ": epoch " + std::to_string(e) + " holds " + std::to_string(len) +
                          " instances, the order " + std::to_string(n) + ": producers disagree");
        }
        std::vector<uint32_t>& perm = perms_[e];
        if (!r.Take(len, &perm)) {
          return DataLoss(who + ": epoch " + std::to_string(e) + " is truncated");
        }
        if (std::any_of(perm.begin(), perm.end(), [n](uint32_t v) { return v >= n; })) {
          return DataLoss(who + ": epoch " + std::to_string(e) + " names an instance past " +
                          std::to_string(n));
        }
      }
      if (!r.done()) return DataLoss(who + ": bytes after the last section");
    }
    for (size_t e = 0; e < epochs; ++e) {
      if (from[e] < 0) return DataLoss("no producer gave epoch " + std::to_string(e));
    }
    owned_.clear();
    return std::unique_ptr<ImageWriter>(
        std::make_unique<OlmoImageWriter>(std::move(plan_), std::move(perms_)));
  }

 private:
  static constexpr int64_t kShareFactsTag = 0x4f4c4d4f;  // "OMLO"

  std::string FactsJson(const config::JobOptions& o, const io::OlmoTokenFiles& files) const {
    nlohmann::json f = nlohmann::json::array();
    for (size_t k = 0; k < files.files().size(); ++k) {
      const StoreFacts s = FactsOf(files.files()[k].path, {}, files.bytes(k), 0);
      char digest[17];
      std::snprintf(digest, sizeof(digest), "%016llx",
                    static_cast<unsigned long long>(s.data_sample_xxh3));
      f.push_back({{"path", files.files()[k].path},
                   {"bytes", files.files()[k].bytes},
                   {"sampled_xxh3", digest}});
    }
    nlohmann::json j = {{"olmo_files", f},
                        {"olmo_instances", plan_.instances},
                        {"olmo_world_size", plan_.world_size},
                        {"olmo_global_batch_size", plan_.global_batch_size},
                        {"olmo_micro_batch_size", plan_.micro_batch_size}};
    // A start inside the order is OLMo's restart there: another order from that point.
    if (plan_.restart != 0) j["olmo_restart_consumed"] = plan_.restart;
    (void)o;
    return j.dump();
  }

  OlmoPlan plan_;
  std::vector<std::vector<uint32_t>> perms_;
  std::vector<char> owned_;  // per epoch, for a share; empty for a whole build
  bool released_ = false;    // ReleaseShareTables
  std::unique_ptr<OlmoView> view_;
  std::string facts_;
};

class OlmoPipeline final : public Pipeline {
 public:
  explicit OlmoPipeline(const config::JobOptions& options) : options_(options) {}
  // Sized for --train-iters: a later cursor only means nothing is left to run.
  bool cursor_bounded_by_split() const override { return false; }
  FieldSchema schema() const override { return GptSchema(options_.data.create_attention_mask); }

  Result<std::unique_ptr<BuiltOrder>> Build() const override { return BuildEpochs(nullptr); }

  // One unit per epoch (its cost: the instances it shuffles); none with one epoch.
  Result<std::vector<uint64_t>> WholeShareUnits() const override {
    GRIDFEED_ASSIGN_OR_RETURN(OlmoPlan plan, PlanOlmoOrder(options_));
    if (plan.epochs < 2) return std::vector<uint64_t>{};
    return std::vector<uint64_t>(static_cast<size_t>(plan.epochs),
                                 static_cast<uint64_t>(plan.instances));
  }

  Result<std::unique_ptr<BuiltOrder>> BuildWholeShare(
      const std::function<bool(size_t unit)>& builds_unit) const override {
    return BuildEpochs(&builds_unit);
  }

  Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const override {
    auto words = [&](size_t i) -> int64_t {
      int64_t v;
      std::memcpy(&v, image.data() + i * sizeof(int64_t), sizeof(v));
      return v;
    };
    const size_t fixed = 2 + kHeaderWords;
    if (image.size() < fixed * sizeof(int64_t) || static_cast<uint64_t>(words(0)) != kImageMagic ||
        words(1) != kImageVersion) {
      return DataLoss("not an OLMo table image (or another version)");
    }
    OlmoPlan plan = olmo_plan::GeometryOf(options_);
    plan.instances = words(2);
    const int64_t nfiles = words(11);
    if (words(3) != plan.world_size || words(4) != plan.global_batch_size ||
        words(5) != plan.micro_batch_size || words(6) != plan.num_workers ||
        words(7) != (plan.drop_last ? 1 : 0) || words(8) != plan.first_epoch ||
        nfiles != static_cast<int64_t>(options_.data.olmo_paths.size()) || plan.instances < 0 ||
        plan.instances >= (int64_t{1} << 32)) {
      return DataLoss("the OLMo table image does not match the options");
    }
    const size_t header = fixed + 2 * static_cast<size_t>(nfiles);
    if (image.size() < header * sizeof(int64_t)) return DataLoss("OLMo table image truncated");
    int64_t start = 0;
    for (int64_t k = 0; k < nfiles; ++k) {
      io::OlmoFileFacts f;
      f.path = options_.data.olmo_paths[static_cast<size_t>(k)];
      f.start = words(fixed + 2 * static_cast<size_t>(k));
      f.instances = words(fixed + 2 * static_cast<size_t>(k) + 1);
      if (f.start != start || f.instances < 0 || f.instances > plan.instances - start) {
        return DataLoss("OLMo table image: bad offsets table");
      }
      start += f.instances;
      plan.files.push_back(f);
    }
    if (start != plan.instances) return DataLoss("OLMo table image: bad offsets table");
    olmo_plan::AssignSources(options_.data, &plan);
    GRIDFEED_RETURN_IF_ERROR(olmo_plan::FinishPlan(options_, &plan));
    if (words(9) != plan.epochs || words(10) != plan.length || words(12) != plan.epoch_stream ||
        words(13) != plan.sizes.total_size || words(14) != plan.restart) {
      return DataLoss("the OLMo table image does not match the options");
    }
    const size_t perm_bytes = PermBytes(plan);
    if ((image.size() - header * sizeof(int64_t)) / perm_bytes < static_cast<size_t>(plan.epochs) ||
        image.size() != header * sizeof(int64_t) + perm_bytes * static_cast<size_t>(plan.epochs)) {
      return DataLoss("OLMo table image: wrong size");
    }
    std::vector<std::span<const uint32_t>> perms;
    const std::byte* p = image.data() + header * sizeof(int64_t);
    for (int64_t e = 0; e < plan.epochs; ++e) {
      // The values are rank 0's permutation (the digest is checked after the broadcast);
      // InstanceAt still checks each one it uses.
      perms.emplace_back(reinterpret_cast<const uint32_t*>(p), static_cast<size_t>(plan.instances));
      p += perm_bytes;
    }
    return std::unique_ptr<OrderView>(new OlmoView(options_, std::move(plan), std::move(perms)));
  }

 private:
  // Every epoch's permutation, or (`builds_epoch`) only those it names: a share.
  Result<std::unique_ptr<BuiltOrder>> BuildEpochs(
      const std::function<bool(size_t)>* builds_epoch) const {
    Stopwatch clock;
    GRIDFEED_ASSIGN_OR_RETURN(OlmoPlan plan, PlanOlmoOrder(options_));
    const auto& d = options_.data;
    GRIDFEED_ASSIGN_OR_RETURN(io::OlmoTokenFiles files,
                              io::OlmoTokenFiles::Open(d.olmo_paths, d.olmo_label_mask_paths,
                                                       TokenSize(d), d.seq_length));
    const double open_s = clock.Seconds();
    std::vector<char> owned;
    if (builds_epoch != nullptr) {
      if (plan.epochs < 2) {
        return FailedPrecondition(
            "this OLMo order has one epoch: its whole image is not divided among producers");
      }
      owned.resize(static_cast<size_t>(plan.epochs));
      for (size_t e = 0; e < owned.size(); ++e) owned[e] = (*builds_epoch)(e) ? 1 : 0;
    }
    std::vector<std::vector<uint32_t>> perms(static_cast<size_t>(plan.epochs));
    int64_t shuffled = 0;
    for (int64_t e = 0; e < plan.epochs; ++e) {
      if (!owned.empty() && !owned[static_cast<size_t>(e)]) continue;
      ++shuffled;
      auto& perm = perms[static_cast<size_t>(e)];
      perm.resize(static_cast<size_t>(plan.instances));
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<uint32_t>(i);
      Pcg64 rng(olmo_plan::EpochSeed(plan, e));
      ShuffleUint32(rng, perm);
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "OLMo order: %lld instances, DP %lld, device batch %lld (micro-batches of "
                  "%lld), %lld epoch(s) from epoch %lld; files %.3f s, shuffles %.3f s",
                  static_cast<long long>(plan.instances), static_cast<long long>(plan.world_size),
                  static_cast<long long>(plan.sizes.device_batch_size),
                  static_cast<long long>(plan.micro_batch_size),
                  static_cast<long long>(plan.epochs), static_cast<long long>(plan.first_epoch),
                  open_s, clock.Seconds() - open_s);
    std::string message = line;
    if (!owned.empty()) {
      message += " (this producer's share: " + std::to_string(shuffled) + " of them)";
    }
    log::Info(message);
    return std::unique_ptr<BuiltOrder>(new OlmoBuilt(options_, std::move(plan), std::move(perms),
                                                     std::move(files), std::move(owned)));
  }

  config::JobOptions options_;
};

}  // namespace

std::unique_ptr<Pipeline> MakeOlmoPipeline(const config::JobOptions& options) {
  return std::make_unique<OlmoPipeline>(options);
}

}  // namespace gridfeed::order
