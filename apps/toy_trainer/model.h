// A small decoder-only transformer for the toy trainer, split into pipeline stages: the first
// stage holds the embeddings and the first half of the layers, the last stage the second half
// and the head. With one stage it holds everything. Layout [S, B, d] (libtorch 1.13's
// transformer layers are sequence-first).
#pragma once

#include <torch/torch.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gridfeed::toy {

struct ModelConfig {
  int64_t vocab_size = 8000;
  int64_t seq_length = 128;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ff = 512;
};

class StageImpl : public torch::nn::Module {
 public:
  StageImpl(const ModelConfig& c, bool first, bool last, int64_t first_layer, int64_t num_layers);
  // First stage: tokens and position_ids [B, S] -> hidden [S, B, d]. Other stages: hidden in.
  // Last stage: returns logits [S, B, vocab]; otherwise hidden [S, B, d]. attn_mask: an
  // additive [S, S] mask (0 = attend, -inf = not), e.g. DocumentCausalMask; undefined = causal.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& position_ids,
                        const torch::Tensor& attn_mask = {});
  bool first() const { return first_; }
  bool last() const { return last_; }

 private:
  bool first_, last_;
  torch::nn::Embedding tokens_{nullptr}, positions_{nullptr};
  torch::nn::ModuleList layers_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Stage);

// Packed (THD) sequences: the additive [total, total] mask of a flattened row whose documents
// cu_seqlens delimits (cu[0] = 0 <= cu[1] <= ... <= cu.back() = total): query q attends to key
// k only if k <= q and both lie in the same [cu[i], cu[i+1]). InvalidArgument-style message in
// *error (and an undefined tensor) for boundaries that are not such a partition.
torch::Tensor DocumentCausalMask(std::span<const int32_t> cu_seqlens, int64_t total,
                                 std::string* error);
// Packed targets: labels with Megatron's ignore index (-100, any negative) clamped to 0 and
// the loss mask zeroed there, so no negative label ever reaches the cross entropy.
std::pair<torch::Tensor, torch::Tensor> SafeTargets(const torch::Tensor& labels,
                                                    const torch::Tensor& loss_mask);

// Mean cross entropy over tokens whose loss_mask is 1. logits [S, B, V], labels/mask [B, S].
torch::Tensor MaskedLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                         const torch::Tensor& loss_mask);
// Each sample's mean cross entropy over its masked-in tokens, [B] (0 for a sample without any).
// For logging: computed without gradients.
torch::Tensor PerSampleLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                            const torch::Tensor& loss_mask);

}  // namespace gridfeed::toy
