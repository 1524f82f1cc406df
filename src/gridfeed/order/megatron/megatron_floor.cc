#include "gridfeed/order/megatron/megatron_floor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "gridfeed/io/indexed_dataset.h"
#include "gridfeed/order/table_image.h"

namespace gridfeed::order {
namespace {

// Megatron-format tables: a sample is seq_length (+1) tokens from its sample_index row on,
// across the documents of document_index (a table built at a mixture stage's own length: that).
class MegatronFloorImpl final : public AssemblyFloor {
 public:
  static Result<std::unique_ptr<AssemblyFloor>> Make(const config::JobOptions& o,
                                                     std::span<const std::byte> image) {
    auto floor = std::unique_ptr<MegatronFloorImpl>(new MegatronFloorImpl());
    GRIDFEED_ASSIGN_OR_RETURN(floor->view_, ParseTableImage(image));
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

  int64_t Copy(Split split, int64_t position, const SampleRecord&) override {
    const int i = static_cast<int>(split);
    const SplitView& s = *view_.splits[i];
    const auto [k, j] = s.Locate(position);
    const GptTablesView& t = s.sources[k].tables;
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
  MegatronFloorImpl() = default;
  TableView view_;
  std::vector<std::unique_ptr<io::IndexedDataset>> stores_;
  std::array<std::vector<const io::IndexedDataset*>, 3> bound_;  // per split and source
  std::array<std::vector<int64_t>, 3> source_tokens_;            // tokens a sample copies
  int64_t tokens_ = 0;                                           // at --seq-length
  std::vector<std::byte> raw_;
  std::vector<int64_t> out_;
};

}  // namespace

Result<std::unique_ptr<AssemblyFloor>> MegatronFloor(const config::JobOptions& options,
                                                     std::span<const std::byte> image) {
  return MegatronFloorImpl::Make(options, image);
}

Result<uint64_t> MegatronTableBytes(const config::JobOptions& options,
                                    std::span<const std::byte> image) {
  (void)options;
  GRIDFEED_ASSIGN_OR_RETURN(TableView view, ParseTableImage(image));
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

}  // namespace gridfeed::order
