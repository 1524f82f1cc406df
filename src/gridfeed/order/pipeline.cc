#include "gridfeed/order/pipeline.h"

#include <algorithm>

#include "gridfeed/order/registry.h"

namespace gridfeed::order {

SampleRecord OrderView::ReadFields(Split split, int64_t position, const FieldTargets& out,
                                   bool hash_tokens, AssemblyScratch* scratch) const {
  SampleRecord r = Read(split, position, &scratch->sample, hash_tokens);
  SliceFields(scratch->sample, static_cast<int64_t>(scratch->sample.tokens.size()), out);
  return r;
}

Status OrderView::ReadPacked(Split, std::span<const int64_t>, const PackedTargets&, bool,
                             std::vector<SampleRecord>*) const {
  return FailedPrecondition("this data order does not pack sequences");
}

int64_t SeqLengths::At(int64_t position) const {
  const auto it = std::upper_bound(begin.begin(), begin.end(), position);
  return length[it == begin.begin() ? 0 : static_cast<size_t>(it - begin.begin()) - 1];
}

int64_t SeqLengths::max() const { return *std::max_element(length.begin(), length.end()); }

Result<int64_t> SeqLengths::Common(std::span<const int64_t> positions) const {
  if (positions.empty() || uniform()) return length[0];
  const int64_t first = At(positions[0]);
  for (int64_t p : positions) {
    if (At(p) != first) {
      return InvalidArgument("positions " + std::to_string(positions[0]) + " and " +
                             std::to_string(p) + " are in stages of different seq lengths (" +
                             std::to_string(first) + " and " + std::to_string(At(p)) +
                             " tokens): ask for one length's positions at a time");
    }
  }
  return first;
}

Result<SeqLengths> SeqLengthsOf(const config::JobOptions& options, Split split) {
  const PipelineKind& kind = KindOf(options.data);
  if (kind.seq_lengths) return kind.seq_lengths(options, split);
  SeqLengths out;
  out.begin = {0};
  out.length = {options.data.seq_length};
  return out;
}

std::string Pipeline::StartHistory(int64_t consumed) const {
  (void)consumed;
  return {};
}

std::string Pipeline::ResumedHistory(const std::string& saved_history,
                                     const std::string& saved_canonical, int64_t resumed_at,
                                     bool amended) const {
  (void)saved_history, (void)saved_canonical, (void)resumed_at, (void)amended;
  return {};
}

Status Pipeline::SamePast(const config::JobOptions& before, std::span<const std::byte> image,
                          int64_t consumed) const {
  (void)before, (void)image, (void)consumed;
  return FailedPrecondition("this data order cannot be resumed under an amended schedule");
}

std::string Pipeline::DescribeStageFrom(int64_t position) const {
  return "the stage from sample " + std::to_string(position);
}

Result<StagePlan> Pipeline::Stages() const {
  return FailedPrecondition("this data order has no stages");
}

Result<std::unique_ptr<Pipeline>> Pipeline::For(const config::JobOptions& options) {
  return KindOf(options.data).make(options);
}

}  // namespace gridfeed::order
