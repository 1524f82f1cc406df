// hf_encode_tool TOKENIZER < texts.jsonl > ids.jsonl
//
// For the oracle check (oracle/hf_oracle_check.sh): loads TOKENIZER with LoadTextTokenizer (a
// Hugging Face folder or tokenizer.json) and, for each input line {"text": "..."}, prints one
// line: the JSON list of Encode's ids, or {"error": "..."}.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "gridfeed/text/text_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: hf_encode_tool TOKENIZER < texts.jsonl > ids.jsonl\n";
    return 2;
  }
  auto tok = gridfeed::text::LoadTextTokenizer(argv[1]);
  if (!tok.ok()) {
    std::cerr << "hf_encode_tool: " << tok.status().message() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      std::cerr << "hf_encode_tool: input line is not {\"text\": string}\n";
      return 1;
    }
    auto ids = tok.value()->Encode(j["text"].get<std::string>());
    if (ids.ok()) {
      std::cout << nlohmann::json(ids.value()).dump() << "\n";
    } else {
      std::cout << nlohmann::json{{"error", ids.status().message()}}.dump() << "\n";
    }
  }
  return 0;
}
