#include "gridfeed/order/sft/pack.h"

#include <algorithm>

#include "gridfeed/order/sft/conversation.h"

namespace gridfeed::order::sft {

Packer::Packer(int64_t seq_length, int64_t pad, int64_t cp) : L_(seq_length), pad_(pad), cp_(cp) {}

void Packer::AppendPad(int64_t count) {
  for (int64_t k = 0; k < count; ++k) {
    T_.push_back(pad_);
    G_.push_back(pad_);
    P_.push_back(P_.back() + 1);
  }
}

bool Packer::Add(const TokenizedConversation& c) {
  T_.insert(T_.end(), c.tokens.begin(), c.tokens.end());
  G_.insert(G_.end(), c.targets.begin(), c.targets.end());
  for (int64_t p = 0; p < static_cast<int64_t>(c.tokens.size()); ++p) P_.push_back(p);
  const auto n = static_cast<int64_t>(T_.size());
  // Megatron pads by the remainder of the whole pack (n = 0 needs none).
  if (cp_ > 1 && n % (2 * cp_) != 0) AppendPad(2 * cp_ - n % (2 * cp_));
  cu_.push_back(static_cast<int64_t>(T_.size()));
  if (static_cast<int64_t>(T_.size()) >= L_ + 1) {
    T_.resize(static_cast<size_t>(L_));
    T_.push_back(pad_);
    G_.resize(static_cast<size_t>(L_));
    G_.push_back(pad_);
    P_.resize(static_cast<size_t>(L_ + 1));
    cu_.back() = L_;
    cut_ = true;
  }
  return cut_;
}

Result<PackedSample> Packer::Finish(const std::string& where) {
  const int64_t L = L_;
  if (!cut_) {
    if (P_.empty()) {
      return InvalidArgument(where +
                             " yields no tokens to pack (no conversation, or only conversations "
                             "that render to nothing); Megatron's SFTDataset fails on it too");
    }
    AppendPad(L + 1 - static_cast<int64_t>(T_.size()));
    cu_.back() = L;
  }
  if (static_cast<int64_t>(cu_.size()) > L + 1) {  // numpy's assignment into L + 1 fails
    return InvalidArgument(where + " has " + std::to_string(cu_.size() - 1) +
                           " conversations in one pack, more than cu_seqlens' " +
                           std::to_string(L) + " slots (Megatron's SFTDataset fails on it too)");
  }
  PackedSample s;
  s.tokens.assign(T_.begin(), T_.begin() + L);
  s.labels.assign(G_.begin() + 1, G_.begin() + L + 1);
  s.position_ids.assign(P_.begin(), P_.begin() + L);
  s.loss_mask.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const int64_t label = s.labels[static_cast<size_t>(i)];
    s.loss_mask[static_cast<size_t>(i)] = (label == pad_ || label == kIgnoreIndex) ? 0.0f : 1.0f;
  }
  s.cu_seqlens.assign(static_cast<size_t>(L + 1), static_cast<int32_t>(L));
  int32_t longest = 0;
  for (size_t k = 0; k < cu_.size(); ++k) {
    s.cu_seqlens[k] = static_cast<int32_t>(cu_[k]);
    if (k > 0) longest = std::max(longest, static_cast<int32_t>(cu_[k] - cu_[k - 1]));
  }
  s.max_seqlen = longest;
  s.num_cu_seqlens = static_cast<int32_t>(cu_.size());
  return s;
}

Result<PackedSample> PackConversations(std::span<const TokenizedConversation> conversations,
                                       int64_t seq_length, int64_t pad, int64_t cp,
                                       const std::string& where) {
  Packer packer(seq_length, pad, cp);
  for (const auto& c : conversations) {
    if (packer.Add(c)) break;
  }
  return packer.Finish(where);
}

}  // namespace gridfeed::order::sft
