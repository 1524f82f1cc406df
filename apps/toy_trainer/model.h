// A small decoder-only transformer for the toy trainer, split into pipeline stages: the first
// stage holds the embeddings and the first half of the layers, the last stage the second half
// and the head. With one stage it holds everything. Layout [S, B, d] (libtorch 1.13's
// transformer layers are sequence-first).
#pragma once

#include <torch/torch.h>

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
  // Last stage: returns logits [S, B, vocab]; otherwise hidden [S, B, d].
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& position_ids);
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

// Mean cross entropy over tokens whose loss_mask is 1. logits [S, B, V], labels/mask [B, S].
torch::Tensor MaskedLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                         const torch::Tensor& loss_mask);
// Each sample's mean cross entropy over its masked-in tokens, [B] (0 for a sample without any).
// For logging: computed without gradients.
torch::Tensor PerSampleLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                            const torch::Tensor& loss_mask);

}  // namespace gridfeed::toy
