#include "gridfeed/order/sft/sft_dataset.h"

#include <algorithm>

#include "gridfeed/config/tokenizer_options.h"

namespace gridfeed::order::sft {

Result<std::unique_ptr<SftDataset>> SftDataset::Open(const config::JobOptions& o) {
  std::unique_ptr<SftDataset> ds(new SftDataset());
  ds->seq_length_ = o.data.seq_length;
  ds->cp_ = o.data.sft_context_parallel_size > 0 ? o.data.sft_context_parallel_size
                                                 : o.grid.context_parallel_size;
  GRIDFEED_ASSIGN_OR_RETURN(config::DataTokenizer tok, config::LoadDataTokenizer(o.data));
  ds->tokenizer_ = std::move(tok.tokenizer);
  ds->tokenizer_digest_ = tok.xxh3;
  GRIDFEED_ASSIGN_OR_RETURN(const PromptFormat format,
                            ParsePromptFormat(o.data.sft_tokenizer_prompt_format));
  auto formatter = ChatFormatter::Make(format, *ds->tokenizer_);
  if (!formatter.ok()) {
    return Status(formatter.status().code(), "--sft-tokenizer-prompt-format " +
                                                 o.data.sft_tokenizer_prompt_format +
                                                 " with the tokenizer " + ds->tokenizer_->path() +
                                                 ": " + formatter.status().message());
  }
  ds->formatter_ = std::move(*formatter);
  GRIDFEED_ASSIGN_OR_RETURN(ds->paths_, SftFiles(o.data));
  for (const auto& p : ds->paths_) {
    GRIDFEED_ASSIGN_OR_RETURN(JsonlRows rows, JsonlRows::Open(p));
    ds->files_.push_back(std::move(rows));
  }
  auto index_of = [&](const std::string& path) {
    return static_cast<int>(std::find(ds->paths_.begin(), ds->paths_.end(), path) -
                            ds->paths_.begin());
  };
  GRIDFEED_ASSIGN_OR_RETURN(ds->layout_, LayoutSft(o.data, [&](const std::string& path) {
                              return ds->files_[static_cast<size_t>(index_of(path))].size();
                            }));
  for (int i = 0; i < 3; ++i) {
    if (!ds->layout_.splits[i]) continue;
    for (const auto& m : ds->layout_.splits[i]->mids)
      ds->file_of_mid_[i].push_back(index_of(m.path));
  }
  return ds;
}

const JsonlRows& SftDataset::file(const std::string& path) const {
  const auto it = std::find(paths_.begin(), paths_.end(), path);
  return files_[static_cast<size_t>(it - paths_.begin())];
}

int64_t SftDataset::length(Split split) const {
  const auto& s = layout_.splits[static_cast<int>(split)];
  return s ? s->length : 0;
}

bool SftDataset::is_blend(Split split) const {
  const auto& s = layout_.splits[static_cast<int>(split)];
  return s && s->blended;
}

const JsonlRows& SftDataset::rows(Split split, int dataset) const {
  return files_[static_cast<size_t>(file_of_mid_[static_cast<int>(split)][dataset])];
}

SftSource SftDataset::Locate(Split split, int64_t position) const {
  const auto [dataset, row] = layout_.Locate(split, position);
  return {dataset, row};
}

Result<PackedSample> SftDataset::Read(Split split, int64_t position, SftSource* source) const {
  const SftSource at = Locate(split, position);
  if (source) *source = at;
  const JsonlRows& file = rows(split, at.dataset);
  const std::string where = file.path() + " row " + std::to_string(at.row);
  GRIDFEED_ASSIGN_OR_RETURN(const Conversation messages, ParseRow(file.Row(at.row), where));
  Packer packer(seq_length_, pad_id(), cp_);
  for (const Conversation& c : SplitConversations(messages)) {
    TokenizedConversation t;  // tokenized as packed: none after the cut (Megatron's order)
    GRIDFEED_RETURN_IF_ERROR(formatter_->Tokenize(c, where, &t.tokens, &t.targets));
    if (packer.Add(t)) break;
  }
  return packer.Finish(where);
}

}  // namespace gridfeed::order::sft
