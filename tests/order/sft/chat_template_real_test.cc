// gridfeed's chat-template engine against jinja2 as transformers configures it: every case of
// tests/golden/chat-templates/renderings.json (real templates of Llama-3.1/3.2, Qwen3, Qwen2.5,
// Mistral v0.3, Gemma-2, DeepSeek-R1-Distill, Phi-3, and feature probes, rendered by
// tests/order/sft/oracle/render_templates.py) is rendered from its row through ParseRow and
// compared byte for byte, or must fail where jinja2 raised. Then the bounds: nesting, recursion,
// steps, output and value bytes, each an error naming the template's line and column.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gridfeed/order/sft/chat_template.h"
#include "gridfeed/order/sft/conversation.h"

namespace gridfeed::order::sft {
namespace {

using Json = nlohmann::ordered_json;

const std::string kFixture = std::string(GRIDFEED_CHAT_TEMPLATES_DIR) + "/renderings.json";

Json LoadFixture() {
  std::ifstream in(kFixture, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

std::tm FixtureNow(const Json& j) {
  std::tm t{};
  t.tm_year = j["now"]["year"].get<int>() - 1900;
  t.tm_mon = j["now"]["month"].get<int>() - 1;
  t.tm_mday = j["now"]["day"].get<int>();
  t.tm_hour = j["now"]["hour"].get<int>();
  t.tm_min = j["now"]["minute"].get<int>();
  t.tm_sec = j["now"]["second"].get<int>();
  std::tm copy = t;
  std::mktime(&copy);  // fills tm_wday and tm_yday
  t.tm_wday = copy.tm_wday;
  t.tm_yday = copy.tm_yday;
  return t;
}

TEST(ChatTemplateReal, RendersAsJinja) {
  const Json fx = LoadFixture();
  const std::tm now = FixtureNow(fx);
  std::map<std::string, std::unique_ptr<ChatTemplate>> parsed;
  std::map<std::string, std::string> parse_errors;
  int total = 0, same = 0, errors_ok = 0;
  std::map<std::string, std::pair<int, int>> per_template;  // same, total
  for (const auto& c : fx["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const Json& t = fx["templates"][name];
    if (!parsed.count(name) && !parse_errors.count(name)) {
      auto p = ChatTemplate::Parse(t["template"].get<std::string>());
      if (p.ok()) {
        parsed[name] = std::move(p).value();
      } else {
        parse_errors[name] = p.status().message();
      }
    }
    ++total;
    ++per_template[name].second;
    const std::string label = name + " / " + c["row"].get<std::string>() +
                              (c["add_generation_prompt"].get<bool>() ? " / agp" : "");
    SCOPED_TRACE(label);
    if (parse_errors.count(name)) {
      if (c.contains("error") &&
          c["error"].get<std::string>().rfind("TemplateSyntaxError", 0) == 0) {
        ++same;
        ++errors_ok;
        ++per_template[name].first;
        EXPECT_NE(parse_errors[name].find("line "), std::string::npos) << parse_errors[name];
        continue;
      }
      ADD_FAILURE() << "parse failed: " << parse_errors[name];
      continue;
    }
    auto conv = ParseRow(fx["rows"][c["row"].get<std::string>()].dump(), "row");
    ASSERT_TRUE(conv.ok()) << conv.status().ToString();
    ChatTemplateContext ctx;
    const Json& tokens = t["tokens"];
    if (tokens.contains("bos_token")) ctx.bos_token = tokens["bos_token"].get<std::string>();
    if (tokens.contains("eos_token")) ctx.eos_token = tokens["eos_token"].get<std::string>();
    if (tokens.contains("pad_token")) ctx.pad_token = tokens["pad_token"].get<std::string>();
    if (tokens.contains("unk_token")) ctx.unk_token = tokens["unk_token"].get<std::string>();
    ctx.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    ctx.now = now;
    auto r = parsed[name]->Render(*conv, ctx);
    if (c.contains("expected")) {
      if (!r.ok()) {
        ADD_FAILURE() << "jinja2 rendered, gridfeed failed: " << r.status().ToString();
        continue;
      }
      EXPECT_EQ(*r, c["expected"].get<std::string>());
      if (*r == c["expected"].get<std::string>()) {
        ++same;
        ++per_template[name].first;
      }
    } else {
      const std::string want = c["error"].get<std::string>();
      if (r.ok()) {
        ADD_FAILURE() << "jinja2 raised '" << want << "', gridfeed rendered: " << *r;
        continue;
      }
      const std::string& msg = r.status().message();
      EXPECT_NE(msg.find("line "), std::string::npos) << msg;
      // raise_exception's own text comes through.
      if (want.rfind("TemplateError: ", 0) == 0) {
        EXPECT_NE(msg.find(want.substr(15)), std::string::npos) << msg;
      }
      ++same;
      ++errors_ok;
      ++per_template[name].first;
    }
  }
  std::string summary;
  for (const auto& [n, st] : per_template) {
    summary += "  " + n + ": " + std::to_string(st.first) + "/" + std::to_string(st.second) + "\n";
  }
  std::printf("chat templates: %d/%d cases as jinja2 (%d of them errors where jinja2 raises)\n%s",
              same, total, errors_ok, summary.c_str());
  EXPECT_EQ(same, total);
  EXPECT_GT(total, 100);
}

// ---------------------------------------------------------------------------------------------
// Bounds.

Conversation OneMessage() { return Conversation{{"user", "hi"}}; }

std::string RenderError(const std::string& src, const ChatTemplateContext& ctx = {}) {
  auto t = ChatTemplate::Parse(src, ctx.limits);
  if (!t.ok()) return "PARSE: " + t.status().message();
  auto r = (*t)->Render(OneMessage(), ctx);
  if (r.ok()) return "RENDERED " + std::to_string(r->size()) + " bytes";
  return "RENDER: " + r.status().message();
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

TEST(ChatTemplateBounds, DeepNestingIsAnErrorWithLineAndColumn) {
  for (const std::string& src : {
           "{{ " + Repeat("(", 5000) + "1" + Repeat(")", 5000) + " }}",
           "{{ " + Repeat("[", 5000) + Repeat("]", 5000) + " }}",
           "{{ " + Repeat("not ", 5000) + "1 }}",
           "{{ " + Repeat("-", 5000) + "1 }}",
           "{{ x" + Repeat("|trim", 5000) + " }}",
           "{{ 1" + Repeat(" + 1", 5000) + " }}",
           "{{ x" + Repeat(".a", 5000) + " }}",
           "\n" + Repeat("{% if true %}", 3000) + Repeat("{% endif %}", 3000),
           Repeat("{% for x in y %}", 3000) + Repeat("{% endfor %}", 3000),
       }) {
    const std::string e = RenderError(src);
    EXPECT_EQ(e.rfind("PARSE: ", 0), 0u) << e;
    EXPECT_NE(e.find("deeper than 256"), std::string::npos) << e;
    EXPECT_NE(e.find(" at line "), std::string::npos) << e;
    EXPECT_NE(e.find(", column "), std::string::npos) << e;
  }
  // Within the bound it parses and renders.
  EXPECT_EQ(RenderError("{{ " + Repeat("(", 100) + "1" + Repeat(")", 100) + " }}"),
            "RENDERED 1 bytes");
}

TEST(ChatTemplateBounds, RecursionIsAnError) {
  const std::string e = RenderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
  EXPECT_NE(e.find("RENDER: "), std::string::npos) << e;
  EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e;
  EXPECT_NE(e.find("at line 1"), std::string::npos) << e;
}

TEST(ChatTemplateBounds, EndlessLoopsHitTheStepLimit) {
  ChatTemplateContext ctx;
  ctx.limits.max_steps = 1'000'000;
  const std::string e = RenderError(
      "{% for a in range(100000) %}\n  {% for b in range(100000) %}{% endfor %}{% endfor %}", ctx);
  EXPECT_NE(e.find("RENDER: "), std::string::npos) << e;
  EXPECT_NE(e.find("more than 1000000 steps"), std::string::npos) << e;
  EXPECT_NE(e.find("at line "), std::string::npos) << e;
  EXPECT_EQ(ChatTemplateLimits{}.max_steps, 100'000'000);
}

TEST(ChatTemplateBounds, RepeatsAreBoundedByBytes) {
  for (const char* src : {"{{ [0] * 268435455 }}", "{{ 'x' * 1000000000000 }}",
                          "{% set s = 'abcdefgh' * 40000000 %}{{ s | length }}",
                          "{{ 'ab' * 9223372036854775807 }}"}) {
    const std::string e = RenderError(src);
    EXPECT_NE(e.find("RENDER: "), std::string::npos) << src << ": " << e;
    EXPECT_NE(e.find("bytes"), std::string::npos) << src << ": " << e;
    EXPECT_NE(e.find("line 1, column"), std::string::npos) << src << ": " << e;
  }
  EXPECT_EQ(RenderError("{{ [0] * 3 }}"), "RENDERED 9 bytes");
}

TEST(ChatTemplateBounds, OutputIsBounded) {
  ChatTemplateContext ctx;
  ctx.limits.max_bytes = 1000;
  const std::string e =
      RenderError("{% for i in range(1000) %}{{ 'abcdefghij' }}{% endfor %}", ctx);
  EXPECT_NE(e.find("output passed the limit of 1000 bytes"), std::string::npos) << e;
  EXPECT_EQ(ChatTemplateLimits{}.max_bytes, int64_t{256} << 20);
}

TEST(ChatTemplateBounds, IntegersAsPython) {
  auto t = ChatTemplate::Parse("{{ 2 ** 3 }} {{ 9223372036854775807 }} {{ 2 ** 62 }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = (*t)->Render(OneMessage(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "8 9223372036854775807 4611686018427387904");
  // Beyond int64 is refused, never wrapped.
  EXPECT_NE(RenderError("{{ 9223372036854775808 }}").find("beyond int64"), std::string::npos);
  EXPECT_NE(RenderError("{{ 2 ** 63 }}").find("beyond int64"), std::string::npos);
  EXPECT_NE(RenderError("{{ 9223372036854775807 + 1 }}").find("beyond int64"), std::string::npos);
}

TEST(ChatTemplateBounds, ErrorsNameLineAndColumn) {
  const std::string e =
      RenderError("line one\n{% for m in messages %}\n  {{ m.x.y }}\n{% endfor %}");
  EXPECT_NE(e.find("at line 3, column 9"), std::string::npos) << e;  // the failing `.y`
  const std::string p = RenderError("ok\n\n   {{ 1 + }}");
  EXPECT_NE(p.find("at line 3, column 11"), std::string::npos) << p;
  const std::string u = RenderError("{{ x | batch(2) }}");
  EXPECT_NE(u.find("filter 'batch' is not supported at line 1, column 8"), std::string::npos) << u;
}

}  // namespace
}  // namespace gridfeed::order::sft
