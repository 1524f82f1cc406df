#include "gridfeed/order/fim/fim_transform.h"

#include <algorithm>
#include <string>

namespace gridfeed::order::fim {
namespace {

using Ids = std::vector<int64_t>;

void Append(Ids* out, std::span<const int64_t> v) { out->insert(out->end(), v.begin(), v.end()); }

struct Fim {
  const text::TextTokenizer& tok;
  const FimConfig& c;
  FimRandom* rng;
  const int64_t* window;  // where the sample's window starts, to say which tokens failed

  // A tokenizer's error, with the window's tokens it was working on.
  Status Within(std::span<const int64_t> seq, const char* doing, const Status& st) const {
    const int64_t from = seq.data() - window;
    return Status(st.code(), std::string(doing) + " the window's tokens [" + std::to_string(from) +
                                 ", " + std::to_string(from + static_cast<int64_t>(seq.size())) +
                                 "): " + st.message());
  }

  // PERMUTE(seq, rate): PSM or SPM around the decoded text's two random cuts.
  Status Permute(std::span<const int64_t> seq, double rate, Ids* out) {
    if (rng->Binomial1(rate) == 0) {
      Append(out, seq);
      return Status::Ok();
    }
    Result<std::string> decoded = tok.Decode(seq);
    if (!decoded.ok()) return Within(seq, "decoding", decoded.status());
    const std::string& text = *decoded;
    if (c.no_prefix && text.starts_with(*c.no_prefix)) {
      Append(out, seq);
      return Status::Ok();
    }
    Result<std::vector<char32_t>> code_points = text::DecodeUtf8(text);
    if (!code_points.ok()) return Within(seq, "reading the text of", code_points.status());
    const std::vector<char32_t>& cps = *code_points;
    const auto n = static_cast<int64_t>(cps.size());
    auto cuts = rng->RandInt2(n + 1);
    std::sort(cuts.begin(), cuts.end());
    const std::span<const char32_t> all(cps);
    std::string prefix, middle, suffix;
    text::AppendUtf8(all.subspan(0, cuts[0]), &prefix);
    text::AppendUtf8(all.subspan(cuts[0], cuts[1] - cuts[0]), &middle);
    text::AppendUtf8(all.subspan(cuts[1]), &suffix);
    Result<Ids> p = tok.Encode(prefix), m = tok.Encode(middle), s = tok.Encode(suffix);
    for (const Result<Ids>* r : {&p, &m, &s}) {
      if (!r->ok()) return Within(seq, "re-encoding the text of", r->status());
    }
    const FimIds& id = c.ids;
    if (rng->Binomial1(c.spm_rate) == 1) {  // SPM
      out->push_back(id.prefix);
      out->push_back(id.suffix);
      Append(out, *s);
      out->push_back(id.middle);
      Append(out, *p);
      Append(out, *m);
    } else {  // PSM
      out->push_back(id.prefix);
      Append(out, *p);
      out->push_back(id.suffix);
      Append(out, *s);
      out->push_back(id.middle);
      Append(out, *m);
    }
    return Status::Ok();
  }

  // FSP(seq): fragments between split tokens permuted at the fragment rate, or the whole.
  Status SplitPermute(std::span<const int64_t> seq, Ids* out) {
    const auto& split = c.ids.split;
    if (!split || std::find(seq.begin(), seq.end(), *split) == seq.end()) {
      return Permute(seq, c.rate, out);
    }
    if (rng->Binomial1(c.rate) == 0) {
      Append(out, seq);
      return Status::Ok();
    }
    size_t s = 0;
    for (size_t p = 0; p < seq.size(); ++p) {
      if (seq[p] != *split) continue;
      if (p > s) {
        GRIDFEED_RETURN_IF_ERROR(Permute(seq.subspan(s, p - s), c.fragment_rate, out));
        out->push_back(*split);
      }
      s = p + 1;
    }
    return Permute(seq.subspan(s), c.fragment_rate, out);
  }
};

}  // namespace

Result<std::vector<int64_t>> FimTransform(const text::TextTokenizer& tokenizer,
                                          const FimConfig& config, std::span<const int64_t> window,
                                          int64_t out_length, FimRandom* rng) {
  Fim fim{tokenizer, config, rng, window.data()};
  Ids out;
  const int64_t eod = config.ids.eod;
  if (std::find(window.begin(), window.end(), eod) == window.end()) {
    GRIDFEED_RETURN_IF_ERROR(fim.SplitPermute(window, &out));
  } else {
    size_t s = 0;
    for (size_t p = 0; p < window.size(); ++p) {
      if (window[p] != eod) continue;
      if (p > s) {
        GRIDFEED_RETURN_IF_ERROR(fim.SplitPermute(window.subspan(s, p - s), &out));
        out.push_back(eod);
      }
      s = p + 1;
    }
    GRIDFEED_RETURN_IF_ERROR(fim.SplitPermute(window.subspan(s), &out));
  }
  out.resize(static_cast<size_t>(out_length), config.ids.pad);
  return out;
}

}  // namespace gridfeed::order::fim
