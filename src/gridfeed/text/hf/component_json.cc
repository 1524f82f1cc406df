#include "gridfeed/text/hf/component_json.h"

namespace gridfeed::text::hf {

Result<const nlohmann::json*> RequiredField(const nlohmann::json& j, std::string_view key,
                                            const JsonWhere& where) {
  if (!j.is_object()) return InvalidArgument("expected a JSON object at " + where.str());
  auto it = j.find(key);
  if (it == j.end()) {
    return InvalidArgument("missing field \"" + std::string(key) + "\" at " + where.str());
  }
  return &*it;
}

Result<bool> RequiredBool(const nlohmann::json& j, std::string_view key, const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* v, RequiredField(j, key, where));
  if (!v->is_boolean()) {
    return InvalidArgument("expected true or false at " + where.Field(key).str());
  }
  return v->get<bool>();
}

Result<bool> OptionalBool(const nlohmann::json& j, std::string_view key, bool fallback,
                          const JsonWhere& where) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  return RequiredBool(j, key, where);
}

Result<std::string> RequiredString(const nlohmann::json& j, std::string_view key,
                                   const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(const nlohmann::json* v, RequiredField(j, key, where));
  if (!v->is_string()) return InvalidArgument("expected a string at " + where.Field(key).str());
  return v->get<std::string>();
}

Result<std::string> RequiredChar(const nlohmann::json& j, std::string_view key,
                                 const JsonWhere& where) {
  GRIDFEED_ASSIGN_OR_RETURN(std::string s, RequiredString(j, key, where));
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  if (chars != 1) {
    return InvalidArgument("expected a single character at " + where.Field(key).str() + ", got \"" +
                           s + "\"");
  }
  return s;
}

Result<Regex> ParsePattern(const nlohmann::json& j, const JsonWhere& where) {
  if (j.is_object() && j.size() == 1) {
    const auto it = j.begin();
    const std::string& kind = it.key();
    if (it->is_string() && (kind == "Regex" || kind == "String")) {
      const std::string& s = it->get_ref<const std::string&>();
      Result<Regex> re = kind == "Regex" ? Regex::Compile(s) : Regex::Literal(s);
      if (!re.ok()) return re.status().WithContext(where.Field(kind).str());
      return re;
    }
  }
  return InvalidArgument("unsupported pattern " + j.dump() + " at " + where.str() +
                         " (expected {\"Regex\": string} or {\"String\": string})");
}

Result<std::string> ComponentType(const nlohmann::json& j, const JsonWhere& where) {
  return RequiredString(j, "type", where);
}

Status UnsupportedType(std::string_view what, std::string_view type, const JsonWhere& where) {
  return InvalidArgument("unsupported " + std::string(what) + " type \"" + std::string(type) +
                         "\" (" + where.Field("type").str() + ")");
}

}  // namespace gridfeed::text::hf
