// Shared by the Hugging Face model tests: the oracle's recorded cases
// (tests/text/data/hf_model_cases.json, written by tests/text/oracle/hf_model_cases.js) and a
// runner that builds each case's model and compares Tokenize with the library's ids.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gridfeed/text/hf/components.h"

namespace gridfeed::text::hf::testing {

inline std::string HfGoldenDir() { return std::string(GRIDFEED_GOLDEN_DIR) + "/../hf-tokenizers"; }

inline nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return nlohmann::json::parse(in);
}

// The model JSON of a case (inline, or the "model" of a tokenizer.json fixture).
inline nlohmann::json CaseModel(const nlohmann::json& c) {
  if (c.contains("model_file")) {
    return LoadJson(HfGoldenDir() + "/" + c["model_file"].get<std::string>())["model"];
  }
  return c["model"];
}

using ModelFactory =
    std::function<Result<std::unique_ptr<Model>>(const nlohmann::json&, const JsonWhere&)>;

// Runs every recorded case whose model has `type`; returns how many pieces were checked.
inline size_t RunModelCases(const std::string& type, const ModelFactory& make) {
  const nlohmann::json cases =
      LoadJson(std::string(GRIDFEED_GOLDEN_DIR) + "/../../text/data/hf_model_cases.json")["cases"];
  size_t checked = 0;
  for (const auto& c : cases) {
    const nlohmann::json model = CaseModel(c);
    if (c["model_type"] != type) continue;
    const std::string name = c["name"];
    auto m = make(model, JsonWhere{"case.json", "model"});
    EXPECT_TRUE(m.ok()) << name << ": " << m.status().ToString();
    if (!m.ok()) continue;
    for (size_t i = 0; i < c["pieces"].size(); ++i) {
      const std::string piece = c["pieces"][i];
      std::vector<int32_t> ids = {-7};  // Tokenize appends
      const Status s = (*m)->Tokenize(piece, &ids);
      if (c["ids"][i].is_null()) {
        EXPECT_FALSE(s.ok()) << name << ": \"" << piece << "\" the library refuses";
      } else {
        EXPECT_TRUE(s.ok()) << name << ": \"" << piece << "\": " << s.ToString();
        std::vector<int32_t> want = {-7};
        for (const auto& id : c["ids"][i]) want.push_back(id.get<int32_t>());
        EXPECT_EQ(ids, want) << name << ": \"" << piece << "\"";
      }
      ++checked;
    }
  }
  return checked;
}

}  // namespace gridfeed::text::hf::testing
