#include "model.h"

namespace gridfeed::toy {

StageImpl::StageImpl(const ModelConfig& c, bool first, bool last, int64_t first_layer,
                     int64_t num_layers)
    : first_(first), last_(last) {
  if (first) {
    tokens_ = register_module("tokens", torch::nn::Embedding(c.vocab_size, c.d_model));
    positions_ = register_module("positions", torch::nn::Embedding(c.seq_length, c.d_model));
  }
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_->push_back(torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(c.d_model, c.heads)
            .dim_feedforward(c.ff)
            .dropout(0.0)));
  }
  register_module("layers" + std::to_string(first_layer), layers_);
  if (last) {
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    head_ = register_module("head", torch::nn::Linear(c.d_model, c.vocab_size));
  }
}

torch::Tensor StageImpl::forward(const torch::Tensor& input, const torch::Tensor& position_ids,
                                 const torch::Tensor& attn_mask) {
  torch::Tensor h;
  if (first_) {
    h = (tokens_(input) + positions_(position_ids)).transpose(0, 1);  // [S, B, d]
  } else {
    h = input;
  }
  const int64_t s = h.size(0);
  // Causal: query i sees keys 0..i (or the caller's mask: documents of a packed row).
  auto mask = attn_mask.defined()
                  ? attn_mask
                  : torch::triu(torch::full({s, s}, -std::numeric_limits<float>::infinity()), 1);
  for (const auto& layer : *layers_) {
    h = layer->as<torch::nn::TransformerEncoderLayer>()->forward(h, mask);
  }
  if (last_) return head_(norm_(h));
  return h;
}

torch::Tensor DocumentCausalMask(std::span<const int32_t> cu, int64_t total, std::string* error) {
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != total) {
    *error = "cu_seqlens must run from 0 to the packed row's " + std::to_string(total) +
             " tokens (got " + std::to_string(cu.size()) + " entries, " +
             (cu.empty() ? std::string("none")
                         : std::to_string(cu.front()) + ".." + std::to_string(cu.back())) +
             ")";
    return {};
  }
  std::vector<int64_t> doc(static_cast<size_t>(total));
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    if (cu[i + 1] < cu[i]) {
      *error = "cu_seqlens decreases at entry " + std::to_string(i + 1) + " (" +
               std::to_string(cu[i]) + " -> " + std::to_string(cu[i + 1]) + ")";
      return {};
    }
    for (int32_t p = cu[i]; p < cu[i + 1]; ++p)
      doc[static_cast<size_t>(p)] = static_cast<int64_t>(i);
  }
  auto d = torch::from_blob(doc.data(), {total}, torch::kInt64).clone();
  auto same_doc = d.unsqueeze(1) == d.unsqueeze(0);                // [q, k]
  auto causal = torch::ones({total, total}, torch::kBool).tril();  // k <= q
  return torch::zeros({total, total})
      .masked_fill(same_doc.logical_and(causal).logical_not(),
                   -std::numeric_limits<float>::infinity());
}

std::pair<torch::Tensor, torch::Tensor> SafeTargets(const torch::Tensor& labels,
                                                    const torch::Tensor& loss_mask) {
  auto ignored = labels < 0;
  return {labels.clamp_min(0), loss_mask.masked_fill(ignored, 0.0)};
}

torch::Tensor MaskedLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                         const torch::Tensor& loss_mask) {
  auto flat = logits.transpose(0, 1).reshape({-1, logits.size(2)});  // [B*S, V]
  auto per_token = torch::nn::functional::cross_entropy(
      flat, labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto mask = loss_mask.reshape({-1});
  return (per_token * mask).sum() / mask.sum().clamp_min(1.0);
}

torch::Tensor PerSampleLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                            const torch::Tensor& loss_mask) {
  torch::NoGradGuard no_grad;
  const int64_t b = labels.size(0), s = labels.size(1);
  auto flat = logits.detach().transpose(0, 1).reshape({-1, logits.size(2)});  // [B*S, V]
  auto per_token = torch::nn::functional::cross_entropy(
                       flat, labels.reshape({-1}),
                       torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
                       .reshape({b, s});
  return (per_token * loss_mask).sum(1) / loss_mask.sum(1).clamp_min(1.0);
}

}  // namespace gridfeed::toy
