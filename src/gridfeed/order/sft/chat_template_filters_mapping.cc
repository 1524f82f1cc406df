// The mapping and object filters of jinja2 3.1 that chat templates use: default, items, dictsort,
// attr, and transformers' tojson (json.dumps with ensure_ascii=False, indent, separators,
// sort_keys) in place of jinja2's (contract: chat_template_filters_internal.h).

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "gridfeed/order/sft/chat_template_ast.h"
#include "gridfeed/order/sft/chat_template_filters_internal.h"

namespace gridfeed::order::sft::chat_template_internal::detail {
namespace {

Result<Value> ToJsonFilter(const Value& v, CallArgs& args, size_t pos) {
  GRIDFEED_ASSIGN_OR_RETURN(
      auto b,
      BindArgs(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0, "tojson()", pos));
  JsonOptions o;
  o.ensure_ascii = b[0] && Truthy(*b[0]);
  o.sort_keys = b[3] && Truthy(*b[3]);
  if (b[1] && !b[1]->is(Value::Kind::kNone)) {
    if (b[1]->IsStr()) {
      o.indent = b[1]->s;
    } else if (b[1]->IsIntLike()) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, b[1]->AsInt())), ' ');
    } else {
      return RuntimeError("tojson(): indent must be an int or a str", pos);
    }
    o.item_sep = ",";
  }
  if (b[2] && !b[2]->is(Value::Kind::kNone)) {
    const Value& s = *b[2];
    if (!s.IsPlainSeq() || s.list->size() != 2 || !(*s.list)[0].IsStr() || !(*s.list)[1].IsStr()) {
      return RuntimeError("tojson(): separators must be a pair of strings", pos);
    }
    o.item_sep = (*s.list)[0].s;
    o.key_sep = (*s.list)[1].s;
  }
  auto r = ToJson(v, o);
  if (!r.ok()) return RuntimeError(r.status().message(), pos);
  return Value::Str(std::move(r).value());
}

}  // namespace

Result<Value> MappingFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                            size_t pos) {
  const FilterBinder bind{args, name + "()", pos};
  if (name == "default" || name == "d") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"default_value", "boolean"}));
    const bool boolean = b[1] && Truthy(*b[1]);
    if (v.IsUndefined() || (boolean && !Truthy(v))) return b[0] ? *b[0] : Value::Str("");
    return v;
  }
  if (name == "tojson") return ToJsonFilter(v, args, pos);
  if (name == "items") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({}));
    if (v.IsUndefined()) return Gen({});
    if (!v.is(Value::Kind::kDict))
      return FilterError("Can only get item pairs from a mapping.", pos);
    List out;
    for (const auto& [k, x] : *v.dict) out.push_back(Value::MakeTuple({Value::Str(k), x}));
    return Gen(std::move(out));
  }
  if (name == "dictsort") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"case_sensitive", "by", "reverse"}));
    if (!v.is(Value::Kind::kDict)) return FilterError("dictsort(): not a mapping", pos);
    int64_t idx = 0;
    if (b[1]) {
      if (b[1]->IsStr() && b[1]->s == "value") {
        idx = 1;
      } else if (!(b[1]->IsStr() && b[1]->s == "key")) {
        return FilterError("You can only sort by either \"key\" or \"value\"", pos);
      }
    }
    List items;
    for (const auto& [k, x] : *v.dict) items.push_back(Value::MakeTuple({Value::Str(k), x}));
    return SortedBy(ev, std::move(items), Value::Int(idx), b[0] && Truthy(*b[0]),
                    b[2] && Truthy(*b[2]), pos);
  }
  if (name == "attr") {
    GRIDFEED_ASSIGN_OR_RETURN(auto b, bind({"name"}, 1));
    if (!b[0]->IsStr()) return FilterError("attr(): the name must be a string", pos);
    if (v.IsUndefined()) return Value::Undefined("'Undefined' has no attribute '" + b[0]->s + "'");
    if (v.is(Value::Kind::kNamespace)) {
      if (const Value* x = DictFind(*v.ns, b[0]->s)) return *x;
    }
    if (auto m = BindMethod(ev, v, b[0]->s)) return *m;
    return Value::Undefined("'" + TypeName(v) + " object' has no attribute '" + b[0]->s + "'");
  }
  return FilterError("filter '" + name + "' is not supported", pos);
}

}  // namespace gridfeed::order::sft::chat_template_internal::detail
