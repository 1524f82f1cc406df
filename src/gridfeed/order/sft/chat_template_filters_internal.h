// Internal to the chat-template filters: the families that chat_template_filters_{string,sequence,
// mapping,number}.cc define, which the registry in chat_template_filters.cc dispatches to, and
// the helpers they share.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridfeed/order/sft/chat_template_ast.h"

namespace gridfeed::order::sft::chat_template_internal::detail {

// A family of filters: runs the filter `name` (one the registry assigns to the family) on `v`.
using FilterFamily = Result<Value> (*)(Evaluator& ev, const std::string& name, const Value& v,
                                       CallArgs& args, size_t pos);

// safe, escape, string, trim, the case filters, replace, indent, center, wordcount, format.
Result<Value> StringFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                           size_t pos);
// length, join, first, last, list, reverse, map, select and reject, sort, unique, min, max, sum.
Result<Value> SequenceFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                             size_t pos);
// default, items, dictsort, attr, tojson.
Result<Value> MappingFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                            size_t pos);
// abs, int, float, round.
Result<Value> NumberFilter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args,
                           size_t pos);

// Helpers the families share (chat_template_filters.cc, SortedBy in _sequence.cc).

// bind(params, required): a filter's arguments by parameter name (BindArgs naming "<name>()").
struct FilterBinder {
  const CallArgs& args;
  const std::string what;
  size_t pos;
  Result<std::vector<std::optional<Value>>> operator()(const std::vector<std::string_view>& params,
                                                       size_t required = 0) const {
    return BindArgs(args, params, required, what, pos);
  }
};

Status FilterError(const std::string& what, size_t pos);
// soft_str: str() of the value, refusing what Python would print as an address.
Result<std::string> SoftStr(const Value& v, size_t pos);
// SoftStr, refusing a Markup string for `filter`.
Result<std::string> PlainStr(const Value& v, size_t pos, const char* filter);
// A generator (map, select, reverse...): always true, no len(), not printable.
Value Gen(List items);
// sorted(items) by `attribute` (make_attrgetter) or the items themselves.
Result<Value> SortedBy(Evaluator& ev, List items, const std::optional<Value>& attribute,
                       bool case_sensitive, bool reverse, size_t pos);

}  // namespace gridfeed::order::sft::chat_template_internal::detail
