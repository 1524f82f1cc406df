#include "bench_image.h"

#include <cstring>
#include <string>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"
#include "gridfeed/order/table_image.h"

namespace gridfeed::app {
namespace {

template <typename T>
void Widen(const std::byte* raw, int64_t n, int64_t* out) {
  const T* p = reinterpret_cast<const T*>(raw);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(p[i]);
}

// Megatron-format tables: a sample is seq_length (+1) tokens from its sample_index row on,
// across the documents of document_index (a table built at a mixture stage's own length: that).
class MegatronFloor final : public AssemblyFloor {
 public:
  static Result<std::unique_ptr<AssemblyFloor>> Make(const config::JobOptions& o,
                                                     std::span<const std::byte> image) {
    auto floor = std::unique_ptr<MegatronFloor>(new MegatronFloor());
    GRIDFEED_ASSIGN_OR_RETURN(floor->view_, order::ParseTableImage(image));
    const int64_t extra = o.data.no_add_extra_token ? 0 : 1;
    floor->tokens_ = o.data.seq_length + extra;
    int64_t longest = floor->tokens_;
    std::vector<std::pair<std::string, const io::IndexedDataset*>> opened;
    // The build on this process checked these files in full: their structure suffices here.
    for (const auto& prefix : floor->view_.prefixes) {
      GRIDFEED_ASSIGN_OR_RETURN(
          io::IndexedDataset ds,
          io::IndexedDataset::Open(prefix, false, io::IndexCheck::kStructure));
      floor->stores_.push_back(std::make_unique<io::IndexedDataset>(std::move(ds)));
      opened.emplace_back(prefix, floor->stores_.back().get());
    }
    for (int i = 0; i < 3; ++i) {
      if (!floor->view_.splits[i]) continue;
      for (const auto& source : floor->view_.splits[i]->sources) {
        for (const auto& [prefix, ds] : opened) {
          if (prefix == source.prefix) floor->bound_[i].push_back(ds);
        }
        const int64_t n = source.seq_length ? source.seq_length + extra : floor->tokens_;
        floor->source_tokens_[i].push_back(n);
        longest = std::max(longest, n);
      }
    }
    size_t widest = 1;
    for (const auto& s : floor->stores_) widest = std::max(widest, io::DTypeSize(s->dtype()));
    floor->raw_.resize(static_cast<size_t>(longest) * widest);
    floor->out_.resize(static_cast<size_t>(longest));
    return std::unique_ptr<AssemblyFloor>(std::move(floor));
  }

  int64_t Copy(order::Split split, int64_t position, const order::SampleRecord&) override {
    const int i = static_cast<int>(split);
    const order::SplitView& s = *view_.splits[i];
    const auto [k, j] = s.Locate(position);
    const order::GptTablesView& t = s.sources[k].tables;
    const io::IndexedDataset& ds = *bound_[i][k];
    const size_t item = io::DTypeSize(ds.dtype());
    const int64_t row = t.ShuffleAt(j);
    const auto docs = static_cast<int64_t>(t.document_index.size());
    const int64_t want = source_tokens_[i][static_cast<size_t>(k)];
    int64_t d = t.SampleDoc(row), offset = t.SampleOffset(row), got = 0;
    while (got < want && d < docs) {
      const int64_t seq = t.document_index[d];
      const int64_t len = std::min<int64_t>(ds.sequence_lengths()[seq] - offset, want - got);
      std::memcpy(raw_.data() + static_cast<size_t>(got) * item,
                  ds.GetUnchecked(seq, offset, len).data, static_cast<size_t>(len) * item);
      got += len;
      ++d;
      offset = 0;
    }
    io::TokenSpan{ds.dtype(), raw_.data(), got}.CopyTo(out_.data());
    return got > 0 ? out_[0] ^ out_[static_cast<size_t>(got - 1)] : 0;
  }

  int64_t tokens_per_sample() const override { return tokens_; }

 private:
  MegatronFloor() = default;
  order::TableView view_;
  std::vector<std::unique_ptr<io::IndexedDataset>> stores_;
  std::array<std::vector<const io::IndexedDataset*>, 3> bound_;  // per split and source
  std::array<std::vector<int64_t>, 3> source_tokens_;            // tokens a sample copies
  int64_t tokens_ = 0;                                           // at --seq-length
  std::vector<std::byte> raw_;
  std::vector<int64_t> out_;
};

// OLMo: instance = seq_length tokens at (file, token offset) = the record's (first_document,
// first_offset).
class OlmoFloor final : public AssemblyFloor {
 public:
  static Result<std::unique_ptr<AssemblyFloor>> Make(const config::JobOptions& o) {
    auto floor = std::unique_ptr<OlmoFloor>(new OlmoFloor());
    GRIDFEED_ASSIGN_OR_RETURN(
        floor->files_, io::OlmoTokenFiles::Open(o.data.olmo_paths, {}, order::OlmoTokenSize(o.data),
                                                o.data.seq_length));
    floor->tokens_ = o.data.seq_length;
    floor->raw_.resize(static_cast<size_t>(floor->tokens_) * 4);
    floor->out_.resize(static_cast<size_t>(floor->tokens_));
    return std::unique_ptr<AssemblyFloor>(std::move(floor));
  }

  int64_t Copy(order::Split, int64_t, const order::SampleRecord& r) override {
    const size_t item = static_cast<size_t>(files_.token_size());
    const auto bytes = files_.bytes(static_cast<size_t>(r.first_document));
    const size_t n = static_cast<size_t>(tokens_);
    std::memcpy(raw_.data(), bytes.data() + static_cast<size_t>(r.first_offset) * item, n * item);
    if (item == 2) {
      Widen<uint16_t>(raw_.data(), tokens_, out_.data());
    } else {
      Widen<uint32_t>(raw_.data(), tokens_, out_.data());
    }
    return out_[0] ^ out_[n - 1];
  }

  int64_t tokens_per_sample() const override { return tokens_; }

 private:
  OlmoFloor() = default;
  io::OlmoTokenFiles files_;
  int64_t tokens_ = 0;
  std::vector<std::byte> raw_;
  std::vector<int64_t> out_;
};

}  // namespace

Result<std::unique_ptr<AssemblyFloor>> MakeAssemblyFloor(const config::JobOptions& options,
                                                         std::span<const std::byte> image) {
  if (options.data.is_olmo()) return OlmoFloor::Make(options);
  return MegatronFloor::Make(options, image);
}

Result<uint64_t> TableBytesOf(const config::JobOptions& options, std::span<const std::byte> image) {
  if (options.data.is_olmo()) {
    GRIDFEED_ASSIGN_OR_RETURN(order::OlmoPlan plan, order::PlanOlmoOrder(options));
    return static_cast<uint64_t>(plan.epochs) * static_cast<uint64_t>(plan.instances) *
           sizeof(uint32_t);
  }
  GRIDFEED_ASSIGN_OR_RETURN(order::TableView view, order::ParseTableImage(image));
  uint64_t bytes = 0;
  auto add = [&bytes](auto span) { bytes += span.size_bytes(); };
  for (const auto& split : view.splits) {
    if (!split) continue;
    for (const auto& source : split->sources) {
      const auto& t = source.tables;
      add(t.document_index), add(t.sample_index32), add(t.sample_index64);
      t.shuffle_index_is_int64 ? add(t.shuffle_index64) : add(t.shuffle_index32);
    }
    add(split->dataset_index), add(split->dataset_sample_index);
  }
  return bytes;
}

}  // namespace gridfeed::app
