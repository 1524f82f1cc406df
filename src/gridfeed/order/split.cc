#include "gridfeed/order/split.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "gridfeed/core/python_float.h"

namespace gridfeed::order {
namespace {

double PairwiseSum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

std::string Strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::optional<double> ParsePythonFloat(const std::string& text) {
  return gridfeed::ParsePythonFloat(text);
}

double NumpySum(const std::vector<double>& values) {
  return PairwiseSum(values.data(), values.size());
}

std::vector<double> Normalize(const std::vector<double>& values) {
  const double sum = NumpySum(values);
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] / sum;
  return out;
}

Result<std::array<double, 3>> ParseAndNormalizeSplit(const std::string& split) {
  // Megatron's regex drops a minus sign ("1,-2,3" reads as 1, 2, 3); a '-' before a number
  // that does not follow a digit or letter ("90-5-5" separates, "1e-3" is Megatron's 1 and 3)
  // is a negative weight, refused.
  for (size_t i = 0; i + 1 < split.size(); ++i) {
    const auto next = static_cast<unsigned char>(split[i + 1]);
    const bool after_name =
        i > 0 && (std::isalnum(static_cast<unsigned char>(split[i - 1])) || split[i - 1] == '.');
    if (split[i] == '-' && (std::isdigit(next) || next == '.') && !after_name) {
      size_t e = i + 1;
      while (e < split.size() &&
             (std::isdigit(static_cast<unsigned char>(split[e])) || split[e] == '.')) {
        ++e;
      }
      return InvalidArgument("--split '" + split + "': '" + split.substr(i, e - i) +
                             "' is negative; split weights must be >= 0");
    }
  }
  static const std::regex run(R"([.0-9]+)");
  std::vector<double> v;
  for (auto it = std::sregex_iterator(split.begin(), split.end(), run);
       it != std::sregex_iterator(); ++it) {
    auto f = ParsePythonFloat(it->str());
    if (!f) {
      return InvalidArgument("--split '" + split + "': '" + it->str() + "' is not a number");
    }
    v.push_back(*f);
  }
  if (v.size() > 3) {
    return InvalidArgument("--split '" + split + "' has " + std::to_string(v.size()) +
                           " values; at most 3 (train, valid, test)");
  }
  while (v.size() < 3) v.push_back(0.0);
  auto n = Normalize(v);
  return std::array<double, 3>{n[0], n[1], n[2]};
}

SplitMatrix SplitVectorToMatrix(const std::array<double, 3>& a,
                                const std::optional<std::array<double, 3>>& b) {
  auto bookends = [](const std::array<double, 3>& v) {
    // Python: sum(v[:k]) starting from the integer 0.
    return std::array<double, 4>{0.0, v[0], v[0] + v[1], (v[0] + v[1]) + v[2]};
  };
  SplitMatrix m;
  auto ea = bookends(a);
  for (int k = 0; k < 3; ++k) {
    double start = ea[k], end = ea[k + 1];
    if (b) {
      auto eb = bookends(*b);
      start = std::max(start, eb[k]);
      end = std::min(end, eb[k + 1]);
    }
    // Megatron drops a bookend only when end <= start, so NaN bookends stay (as in Python).
    if (!(end <= start)) m[k] = std::make_pair(start, end);
  }
  return m;
}

std::pair<int64_t, int64_t> BookendToRange(const std::pair<double, double>& bookend,
                                           int64_t num_elements) {
  const double n = static_cast<double>(num_elements);
  // nearbyint under the default rounding mode is Python's round-half-to-even.
  return {static_cast<int64_t>(std::nearbyint(bookend.first * n)),
          static_cast<int64_t>(std::nearbyint(bookend.second * n))};
}

Result<Blend> ParseDataPath(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return InvalidArgument("empty data path: give at least one prefix");
  Blend blend;
  if (tokens.size() % 2 == 1) {
    for (const auto& t : tokens) blend.prefixes.push_back(Strip(t));
    return blend;
  }
  std::vector<std::optional<double>> weights;
  for (size_t i = 0; i < tokens.size(); i += 2) weights.push_back(ParsePythonFloat(tokens[i]));
  size_t first_bad = weights.size();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!weights[i]) {
      first_bad = i;
      break;
    }
  }
  if (first_bad == weights.size()) {
    blend.weights = std::vector<double>();
    for (size_t i = 0; i < tokens.size(); i += 2) {
      blend.weights->push_back(*weights[i / 2]);
      blend.prefixes.push_back(Strip(tokens[i + 1]));
    }
    return blend;
  }
  for (size_t i = first_bad + 1; i < weights.size(); ++i) {
    if (weights[i]) {
      return InvalidArgument("data path mixes weights and prefixes: '" + tokens[2 * first_bad] +
                             "' is not a weight but '" + tokens[2 * i] +
                             "' is; give 'W1 P1 W2 P2 ...' or only prefixes");
    }
  }
  for (const auto& t : tokens) blend.prefixes.push_back(Strip(t));
  return blend;
}

std::vector<std::array<std::optional<int64_t>, 3>> SizePerSplitPerDataset(
    const std::vector<double>& w, const std::array<std::optional<int64_t>, 3>& target,
    double surplus) {
  std::vector<std::array<std::optional<int64_t>, 3>> out(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    for (int i = 0; i < 3; ++i) {
      if (!target[i]) continue;
      const double t = std::ceil(static_cast<double>(*target[i]) * w[k]);
      out[k][i] = static_cast<int64_t>(std::ceil(t * (1.0 + surplus)));
    }
  }
  return out;
}

Result<SplitMatrix> SplitMatrixOf(const std::string& split, std::vector<std::string>* warnings) {
  const std::string text = split.empty() ? "969, 30, 1" : split;
  if (split.empty()) {
    warnings->push_back("no --split given: using Megatron's legacy default \"969, 30, 1\"");
  }
  if (text.find_first_of("0123456789") == std::string::npos) {
    return InvalidArgument("--split '" + text + "' holds no number: it takes the splits' " +
                           "weights, such as 98,2,0 (the split a command reads is --split-name)");
  }
  GRIDFEED_ASSIGN_OR_RETURN(auto vec, ParseAndNormalizeSplit(text));
  if (!std::isfinite(vec[0]) || !std::isfinite(vec[1]) || !std::isfinite(vec[2])) {
    return InvalidArgument("--split '" + text + "' sums to 0; give at least one positive part");
  }
  return SplitVectorToMatrix(vec);
}

Result<std::vector<double>> NormalizedBlendWeights(const std::vector<double>& raw) {
  for (double w : raw) {
    if (!(w > 0) || !std::isfinite(w)) {
      return InvalidArgument("--data-path: blend weights must be finite and > 0, got " +
                             std::to_string(w));
    }
  }
  std::vector<double> w = Normalize(raw);
  for (double x : w) {
    if (!std::isfinite(x) || !(x > 0)) {  // e.g. weights near 1e308: their sum overflows
      return InvalidArgument(
          "--data-path: the blend weights overflow when summed; scale them down");
    }
  }
  return w;
}

}  // namespace gridfeed::order
