#include "gridfeed/order/fim/fim_dataset.h"

#include "gridfeed/config/tokenizer_options.h"
#include "gridfeed/order/megatron/megatron_pipeline.h"
#include "gridfeed/order/sample_fields.h"

namespace gridfeed::order::fim {
namespace {

Result<int64_t> TokenIdOf(const text::TextTokenizer& tok, const std::string& flag,
                          const std::string& name) {
  const std::optional<int64_t> id = tok.TokenId(name);
  if (!id) {
    return InvalidArgument(flag + " '" + name + "' is not a token of the tokenizer " + tok.path());
  }
  return *id;
}

}  // namespace

Result<FimSetup> OpenFimSetup(const config::JobOptions& o) {
  GRIDFEED_RETURN_IF_ERROR(config::Validate(o));
  const config::DataOptions& d = o.data;
  FimSetup setup;
  GRIDFEED_ASSIGN_OR_RETURN(config::DataTokenizer loaded, config::LoadDataTokenizer(d));
  setup.tokenizer = std::move(loaded.tokenizer);
  const text::TextTokenizer& tok = *setup.tokenizer;
  setup.tokenizer_xxh3 = loaded.xxh3;
  setup.tokenizer_bytes = loaded.bytes;
  FimConfig& f = setup.fim;
  f.rate = d.fim_rate;
  f.spm_rate = d.fim_spm_rate;
  f.fragment_rate = d.fim_fragment_rate;
  if (!d.fim_no_prefix.empty()) f.no_prefix = d.fim_no_prefix;
  GRIDFEED_ASSIGN_OR_RETURN(f.ids.prefix, TokenIdOf(tok, "--fim-prefix-token", d.fim_prefix_token));
  GRIDFEED_ASSIGN_OR_RETURN(f.ids.middle, TokenIdOf(tok, "--fim-middle-token", d.fim_middle_token));
  GRIDFEED_ASSIGN_OR_RETURN(f.ids.suffix, TokenIdOf(tok, "--fim-suffix-token", d.fim_suffix_token));
  GRIDFEED_ASSIGN_OR_RETURN(f.ids.pad, TokenIdOf(tok, "--fim-pad-token", d.fim_pad_token));
  GRIDFEED_ASSIGN_OR_RETURN(f.ids.eod, TokenIdOf(tok, "--fim-eod-token", d.fim_eod_token));
  if (!d.fim_split_sample.empty()) {
    GRIDFEED_ASSIGN_OR_RETURN(f.ids.split,
                              TokenIdOf(tok, "--fim-split-sample", d.fim_split_sample));
  }
  if (!tok.eos_id()) {
    return InvalidArgument("the tokenizer " + tok.path() +
                           " has no eos token (GPT masks need the tokenizer's eod)");
  }
  // The GPT side: the tokenizer's eod and pad, Megatron's collision rule (a pad equal to one
  // of the tokenizer's single special tokens is replaced by -1).
  setup.gpt = d;
  setup.gpt.eod_id = *tok.eos_id();
  setup.gpt.pad_id = tok.pad_id().value_or(-1);
  setup.sample_options = MegatronSampleOptions(setup.gpt);  // a pad equal to the eod becomes -1
  for (const auto& other : {tok.bos_id(), tok.unk_id()}) {
    if (other && setup.gpt.pad_id == *other) setup.sample_options.pad_id = -1;
  }
  setup.inter_document_masking = d.dataloader_inter_document_masking;
  setup.seed = static_cast<uint32_t>(d.seed);
  return setup;
}

Status FimSample(const FimSetup& setup, std::span<const int64_t> window, FimRandom* rng,
                 Sample* out) {
  const SampleOptions& so = setup.sample_options;
  const int64_t L = so.seq_length;
  GRIDFEED_ASSIGN_OR_RETURN(const std::vector<int64_t> v,
                            FimTransform(*setup.tokenizer, setup.fim, window, L + 1, rng));
  const auto S = static_cast<size_t>(L);
  out->tokens.resize(S);
  out->labels.resize(S);
  out->loss_mask.resize(S);
  out->position_ids.resize(S);
  out->attention_mask.resize(so.create_attention_mask ? S * S : 0);
  FieldTargets t;
  t.tokens = out->tokens.data();
  t.labels = out->labels.data();
  t.loss_mask = out->loss_mask.data();
  t.position_ids = out->position_ids.data();
  t.attention_mask = out->attention_mask.empty() ? nullptr : out->attention_mask.data();
  WindowFields(v.data(), so, t);
  out->cu_seqlens.clear();
  out->max_seqlen = 0;
  if (setup.inter_document_masking) {
    // GPTFIMDataset reports one document of L + 1 tokens: cu_seqlens [0, L] padded with L.
    out->cu_seqlens.assign(S + 1, static_cast<int32_t>(L));
    out->cu_seqlens[0] = 0;
    out->max_seqlen = static_cast<int32_t>(L);
    for (size_t i = 0; i < S; ++i) out->position_ids[i] = static_cast<int64_t>(i);
  }
  return Status::Ok();
}

Status FimSampleError(const Status& st, Split split, int64_t position, const std::string& store,
                      int64_t sample) {
  return Status(st.code(), std::string("FIM sample at ") + kSplitNames[static_cast<int>(split)] +
                               " position " + std::to_string(position) + " (sample " +
                               std::to_string(sample) + " of the store '" + store +
                               "'): " + st.message());
}

Result<std::unique_ptr<FimDataset>> FimDataset::Open(const config::JobOptions& o) {
  std::unique_ptr<FimDataset> ds(new FimDataset());
  GRIDFEED_ASSIGN_OR_RETURN(ds->setup_, OpenFimSetup(o));
  GRIDFEED_ASSIGN_OR_RETURN(ds->built_, BuildMegatronDatasets(ds->setup_.gpt));
  ds->view_ = ViewOf(ds->built_);
  for (int i = 0; i < 3; ++i) {
    if (ds->view_.splits[i]) ds->streams_[i].resize(ds->view_.splits[i]->sources.size());
  }
  return ds;
}

int64_t FimDataset::length(Split split) const {
  const auto& s = view_.splits[static_cast<int>(split)];
  return s ? s->length : 0;
}

bool FimDataset::is_blend(Split split) const {
  const auto& s = view_.splits[static_cast<int>(split)];
  return s && s->blended;
}

Status FimDataset::Read(Split split, int64_t p, Sample* out, FimSource* source,
                        std::vector<FimDraw>* trace) {
  const int si = static_cast<int>(split);
  const SplitView& sv = *view_.splits[si];
  const auto [k, sample] = sv.Locate(p);
  source->dataset = k;
  source->sample = sample;
  const SourceView& src = sv.sources[k];
  const io::IndexedDataset& store = *built_.splits[si]->mids[k].dataset;
  GatherWindow(store, src.tables, sample, setup_.sample_options.seq_length, &source->window);
  auto& stream = streams_[si][k];
  if (!stream) stream = std::make_unique<FimRandom>(setup_.seed);
  stream->set_trace(trace);
  Status st = FimSample(setup_, source->window, stream.get(), out);
  stream->set_trace(nullptr);
  if (!st.ok()) return FimSampleError(st, split, p, store.prefix(), sample);
  return st;
}

}  // namespace gridfeed::order::fim
