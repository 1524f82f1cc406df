#include "gridfeed/order/sft/sft_layout.h"

#include <algorithm>
#include <cmath>

namespace gridfeed::order::sft {
namespace {

// The sample counts of the three splits (-1 = none).
Result<std::array<std::optional<int64_t>, 3>> Sizes(const config::DataOptions& d) {
  const char* names[3] = {"--train-samples", "--valid-samples", "--test-samples"};
  const std::string* values[3] = {&d.train_samples, &d.valid_samples, &d.test_samples};
  std::array<std::optional<int64_t>, 3> sizes;
  for (int i = 0; i < 3; ++i) {
    GRIDFEED_ASSIGN_OR_RETURN(int64_t n, config::ParseSampleCount(names[i], *values[i]));
    if (n >= 0) sizes[i] = n;
  }
  return sizes;
}

const std::vector<std::string>* PerSplitPath(const config::DataOptions& d, int i) {
  const std::vector<std::string>* p[3] = {&d.train_data_path, &d.valid_data_path,
                                          &d.test_data_path};
  return p[i]->empty() ? nullptr : p[i];
}

bool IsPerSplit(const config::DataOptions& d) {
  return PerSplitPath(d, 0) || PerSplitPath(d, 1) || PerSplitPath(d, 2);
}

Status CheckRows(const SftMid& m, Split split) {
  if (m.num_samples > 0 && m.end <= m.begin) {
    return FailedPrecondition(std::string("split ") + kSplitNames[static_cast<int>(split)] + ": '" +
                              m.path + "' has no rows in this split (rows [" +
                              std::to_string(m.begin) + ", " + std::to_string(m.end) +
                              ")) but is asked for " + std::to_string(m.num_samples) +
                              " samples; change --split or the sample counts");
  }
  return Status::Ok();
}

}  // namespace

std::pair<int, int64_t> SftLayout::Locate(Split split, int64_t position) const {
  const SftSplit& s = *splits[static_cast<int>(split)];
  int k = 0;
  int64_t item = position;
  if (s.blended) {
    k = s.blend.dataset_index[static_cast<size_t>(position)];
    item = s.blend.dataset_sample_index[static_cast<size_t>(position)];
  }
  const SftMid& m = s.mids[static_cast<size_t>(k)];
  return {k, m.begin + item % (m.end - m.begin)};
}

Result<std::vector<std::string>> SftFiles(const config::DataOptions& d) {
  std::vector<std::string> files;
  auto add = [&](const std::vector<std::string>& tokens) -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(Blend b, ParseDataPath(tokens));
    for (const auto& p : b.prefixes) {
      if (std::find(files.begin(), files.end(), p) == files.end()) files.push_back(p);
    }
    return Status::Ok();
  };
  if (IsPerSplit(d)) {
    if (!d.data_path.empty()) {
      return InvalidArgument("give --data-path or --train/valid/test-data-path, not both");
    }
    for (int i = 0; i < 3; ++i) {
      if (const auto* p = PerSplitPath(d, i)) GRIDFEED_RETURN_IF_ERROR(add(*p));
    }
  } else {
    if (d.data_path.empty()) {
      return InvalidArgument("--sft: no data: give --data-path or --train/valid/test-data-path");
    }
    GRIDFEED_RETURN_IF_ERROR(add(d.data_path));
  }
  return files;
}

Result<SftLayout> LayoutSft(const config::DataOptions& d,
                            const std::function<int64_t(const std::string&)>& rows_of) {
  SftLayout out;
  GRIDFEED_ASSIGN_OR_RETURN(const auto sizes, Sizes(d));
  const bool per_split = IsPerSplit(d);
  if (!per_split) {
    GRIDFEED_ASSIGN_OR_RETURN(out.split_matrix, SplitMatrixOf(d.split, &out.warnings));
  }
  for (int i = 0; i < 3; ++i) {
    const Split split = static_cast<Split>(i);
    const std::vector<std::string>* tokens = per_split ? PerSplitPath(d, i) : &d.data_path;
    if (tokens == nullptr) continue;
    const Bookend bookend = per_split ? Bookend(std::make_pair(0.0, 1.0)) : out.split_matrix[i];
    if (!bookend) continue;
    if (!sizes[i]) {
      return InvalidArgument(std::string("--sft: split ") + kSplitNames[i] +
                             " needs a sample count (--" + kSplitNames[i] +
                             "-samples N): an SFT dataset is as long as it is asked to be");
    }
    GRIDFEED_ASSIGN_OR_RETURN(const Blend b, ParseDataPath(*tokens));
    auto mid = [&](const std::string& path, int64_t num_samples) {
      SftMid m;
      m.path = path;
      std::tie(m.begin, m.end) = BookendToRange(*bookend, rows_of(path));
      m.num_samples = num_samples;
      return m;
    };
    SftSplit s;
    if (b.prefixes.size() == 1 && (per_split || !b.weights)) {
      s.mids.push_back(mid(b.prefixes[0], *sizes[i]));
      s.length = *sizes[i];
    } else if (!b.weights) {
      return InvalidArgument(
          "--sft: a blend of several JSON Lines files needs weights (W1 FILE1 W2 FILE2 ...): an "
          "unweighted one has no sample count per file (Megatron fails on it)");
    } else {
      GRIDFEED_ASSIGN_OR_RETURN(const std::vector<double> w, NormalizedBlendWeights(*b.weights));
      const auto per_dataset = SizePerSplitPerDataset(w, sizes, d.mid_level_dataset_surplus);
      s.blended = true;
      s.weights = Normalize(w);  // BlendedDataset normalises once more
      int64_t size = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        size += static_cast<int64_t>(std::ceil(static_cast<double>(*sizes[i]) * w[k]));
        s.mids.push_back(mid(b.prefixes[k], per_dataset[k][i].value_or(0)));
      }
      s.blend = BuildBlendingIndices(s.weights, size);
      s.length = static_cast<int64_t>(s.blend.dataset_index.size());
      std::vector<int64_t> needed(s.mids.size(), 0);
      for (int64_t p = 0; p < s.length; ++p) {
        const auto k = static_cast<size_t>(s.blend.dataset_index[static_cast<size_t>(p)]);
        needed[k] = std::max(needed[k], s.blend.dataset_sample_index[static_cast<size_t>(p)] + 1);
      }
      for (size_t k = 0; k < s.mids.size(); ++k) {
        if (needed[k] > s.mids[k].num_samples) {
          return FailedPrecondition(std::string("split ") + kSplitNames[i] + ": blend source " +
                                    std::to_string(k) + " ('" + s.mids[k].path + "') has " +
                                    std::to_string(s.mids[k].num_samples) +
                                    " samples but the blend needs " + std::to_string(needed[k]) +
                                    "; raise --mid-level-dataset-surplus");
        }
      }
    }
    for (const auto& m : s.mids) GRIDFEED_RETURN_IF_ERROR(CheckRows(m, split));
    out.splits[i] = std::move(s);
  }
  return out;
}

}  // namespace gridfeed::order::sft
