// tokenizer_speed_tool TOKENIZER TEXTS.jsonl IDS_OUT [PASSES]
//
// gridfeed's side of tests/bench/tokenizer_speed.sh (tokenizer_speed.js is the library's side):
// loads TOKENIZER (a Hugging Face folder or tokenizer.json) with LoadTextTokenizer, encodes every
// {"text": ...} line of TEXTS.jsonl on this one thread, PASSES times (default 3), writes the ids
// of the first pass to IDS_OUT (one line per text, ids separated by spaces) and prints one JSON
// line: {"tokens": per pass, "bytes": per pass, "seconds": the fastest pass, "passes": n}.
// Loading and reading are outside the timed passes, as in the JS driver.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/text/text_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::cerr << "usage: tokenizer_speed_tool TOKENIZER TEXTS.jsonl IDS_OUT [PASSES]\n";
    return 2;
  }
  const int passes = argc == 5 ? std::stoi(argv[4]) : 3;
  auto tok = gridfeed::text::LoadTextTokenizer(argv[1]);
  if (!tok.ok()) {
    std::cerr << "tokenizer_speed_tool: " << tok.status().message() << "\n";
    return 1;
  }
  std::vector<std::string> texts;
  size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string()) {
        std::cerr << "tokenizer_speed_tool: " << argv[2] << ": a line is not {\"text\": string}\n";
        return 1;
      }
      texts.push_back(j["text"].get<std::string>());
      bytes += texts.back().size();
    }
  }
  std::vector<std::vector<int64_t>> first(texts.size());
  double best = 0;
  size_t tokens = 0;
  for (int pass = 0; pass < passes; ++pass) {
    size_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tok.value()->Encode(texts[i]);
      if (!ids.ok()) {
        std::cerr << "tokenizer_speed_tool: text " << i << ": " << ids.status().message() << "\n";
        return 1;
      }
      n += ids.value().size();
      if (pass == 0) first[i] = std::move(ids).value();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass == 0 || s < best) best = s;
    tokens = n;
  }
  std::ofstream out(argv[3]);
  for (const auto& ids : first) {
    for (size_t k = 0; k < ids.size(); ++k) out << (k ? " " : "") << ids[k];
    out << "\n";
  }
  std::cout << nlohmann::json{{"tokens", tokens}, {"bytes", bytes}, {"seconds", best},
                              {"passes", passes}}
                   .dump()
            << "\n";
  return out.good() ? 0 : 1;
}
