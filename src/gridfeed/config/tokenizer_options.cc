#include "gridfeed/config/tokenizer_options.h"

#include <xxhash.h>

#include <filesystem>

#include "gridfeed/io/file_util.h"

namespace gridfeed::config {

text::TokenizerSpec TokenizerSpecOf(const DataOptions& d) {
  text::TokenizerSpec s;
  s.type = d.tokenizer_type;
  s.model = d.tokenizer_model;
  s.vocab_file = d.vocab_file;
  s.merge_file = d.merge_file;
  s.tiktoken_pattern = d.tiktoken_pattern;
  s.tiktoken_num_special_tokens = d.tiktoken_num_special_tokens;
  if (!d.tokenizer_special_tokens.empty()) s.tokenizer_special_tokens = d.tokenizer_special_tokens;
  s.special_tokens = d.special_tokens;
  s.vocab_size = d.vocab_size;
  return s;
}

bool HasTokenizer(const DataOptions& d) {
  return !d.tokenizer_model.empty() || !d.tokenizer_type.empty();
}

Result<DataTokenizer> LoadDataTokenizer(const DataOptions& d) {
  const text::TokenizerSpec spec = TokenizerSpecOf(d);
  GRIDFEED_RETURN_IF_ERROR(text::CheckTokenizerSpec(spec));
  auto loaded = text::LoadTokenizer(spec);
  if (!loaded.ok()) {
    const std::string flag = !d.tokenizer_model.empty() ? "--tokenizer-model " + d.tokenizer_model
                                                        : "--tokenizer-type " + d.tokenizer_type;
    return Status(loaded.status().code(), flag + ": " + loaded.status().message());
  }
  DataTokenizer out;
  out.tokenizer = std::move(loaded).value();
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  const std::string& path = out.tokenizer->path();
  if (fs::is_regular_file(path, ec)) files.push_back(path);
  if (out.tokenizer->kind() == "huggingface") {
    for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
      const fs::path p = fs::path(path).parent_path() / name;
      if (fs::is_regular_file(p, ec)) files.push_back(p.string());
    }
  }
  if (!d.merge_file.empty()) files.push_back(d.merge_file);
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  if (state == nullptr) return Internal("no memory for a hash state");
  XXH3_64bits_reset(state.get());
  for (const auto& f : files) {
    GRIDFEED_ASSIGN_OR_RETURN(const std::string bytes, io::ReadFileToString(f));
    XXH3_64bits_update(state.get(), bytes.data(), bytes.size());
    out.bytes += static_cast<int64_t>(bytes.size());
  }
  out.xxh3 = XXH3_64bits_digest(state.get());
  return out;
}

std::vector<std::string> TokenizerFiles(const DataOptions& d) {
  std::vector<std::string> files;
  for (const std::string* f : {&d.tokenizer_model, &d.vocab_file, &d.merge_file}) {
    if (!f->empty()) files.push_back(*f);
  }
  return files;
}

}  // namespace gridfeed::config
