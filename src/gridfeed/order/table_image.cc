#include "gridfeed/order/table_image.h"

#include <xxhash.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

namespace gridfeed::order {
namespace {

constexpr char kMagic[8] = {'G', 'F', 'T', 'A', 'B', 'L', 'E', 'S'};
constexpr uint64_t kVersion = 1;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Collects arrays and records where each will sit relative to the data section.
class Arrays {
 public:
  // Records where `v` goes. With `release`, CopyTo frees `v` right after copying it, so the
  // image and the tables are not both held in full (rank 0's peak stays near one copy).
  template <typename T>
  nlohmann::json Add(std::vector<T>& v, bool release) {
    const size_t offset = Align8(size_);
    Part part{offset, v.size() * sizeof(T), reinterpret_cast<const std::byte*>(v.data()), {}};
    if (release) part.release = [&v] { std::vector<T>().swap(v); };
    parts_.push_back(std::move(part));
    size_ = offset + v.size() * sizeof(T);
    return nlohmann::json::array({offset, v.size()});
  }
  size_t size() const { return size_; }
  // Copies every array to `base` (gaps between them zeroed), releasing each after its copy.
  void CopyTo(std::byte* base) {
    size_t at = 0;
    for (auto& p : parts_) {
      std::memset(base + at, 0, p.offset - at);
      if (p.size) std::memcpy(base + p.offset, p.data, p.size);
      at = p.offset + p.size;
      if (p.release) p.release();
    }
  }

 private:
  struct Part {
    size_t offset, size;
    const std::byte* data;
    std::function<void()> release;
  };
  std::vector<Part> parts_;
  size_t size_ = 0;
};

template <typename T>
Result<std::span<const T>> ArrayAt(std::span<const std::byte> data, const nlohmann::json& where,
                                   const char* name) {
  if (!where.is_array() || where.size() != 2) {
    return DataLoss(std::string("table image: bad directory entry for ") + name);
  }
  const uint64_t offset = where[0].get<uint64_t>(), count = where[1].get<uint64_t>();
  if (offset % 8 != 0 || offset > data.size() || count > (data.size() - offset) / sizeof(T)) {
    return DataLoss(std::string("table image: array ") + name + " [offset " +
                    std::to_string(offset) + ", " + std::to_string(count) +
                    " elements] lies outside the image's " + std::to_string(data.size()) +
                    " data bytes");
  }
  return std::span<const T>(reinterpret_cast<const T*>(data.data() + offset), count);
}

}  // namespace

struct TableImageWriter::Plan {
  BuiltDatasets built;
  Arrays arrays;
  std::string directory;
  size_t head = 0;
};

std::unique_ptr<TableImageWriter> TableImageWriter::Create(BuiltDatasets&& built) {
  std::unique_ptr<TableImageWriter> w(new TableImageWriter());
  w->plan_ = std::make_unique<Plan>();
  Plan& p = *w->plan_;
  p.built = std::move(built);  // the arrays below refer to the plan's own copy
  nlohmann::json splits = nlohmann::json::array();
  for (int i = 0; i < 3; ++i) {
    if (!p.built.splits[i]) {
      splits.push_back(nullptr);
      continue;
    }
    SplitDataset& sd = *p.built.splits[i];
    nlohmann::json js = {{"blended", sd.blended}, {"length", sd.length}};
    nlohmann::json mids = nlohmann::json::array();
    for (auto& m : sd.mids) {
      auto& t = m.tables;
      nlohmann::json jm = {{"prefix", m.prefix}, {"begin", m.begin}, {"end", m.end}};
      jm["document_index"] = p.arrays.Add(t.document_index, true);
      if (t.sample_index_is_int64) {
        jm["sample_index64"] = p.arrays.Add(t.sample_index64, true);
      } else {
        jm["sample_index32"] = p.arrays.Add(t.sample_index32, true);
      }
      if (t.shuffle_index_is_int64) {
        jm["shuffle_index64"] = p.arrays.Add(t.shuffle_index64, true);
      } else {
        jm["shuffle_index32"] = p.arrays.Add(t.shuffle_index32, true);
      }
      mids.push_back(jm);
    }
    js["mids"] = mids;
    if (sd.blended) {
      js["dataset_index"] = p.arrays.Add(sd.blend.dataset_index, true);
      js["dataset_sample_index"] = p.arrays.Add(sd.blend.dataset_sample_index, true);
    }
    splits.push_back(js);
  }
  p.directory = nlohmann::json({{"splits", splits}, {"pad_id_used", p.built.pad_id_used}}).dump();
  p.head = Align8(sizeof(kMagic) + 16 + p.directory.size());
  return w;
}

TableImageWriter::TableImageWriter() = default;
TableImageWriter::~TableImageWriter() = default;

size_t TableImageWriter::size() const { return plan_->head + plan_->arrays.size(); }

void TableImageWriter::WriteTo(std::byte* dst) {
  Plan& p = *plan_;
  std::memcpy(dst, kMagic, sizeof(kMagic));
  const uint64_t version = kVersion, dir_len = p.directory.size();
  std::memcpy(dst + 8, &version, 8);
  std::memcpy(dst + 16, &dir_len, 8);
  std::memcpy(dst + 24, p.directory.data(), p.directory.size());
  std::memset(dst + 24 + p.directory.size(), 0, p.head - 24 - p.directory.size());
  p.arrays.CopyTo(dst + p.head);
}

std::vector<std::byte> SerializeTables(BuiltDatasets built) {
  auto w = TableImageWriter::Create(std::move(built));
  std::vector<std::byte> image(w->size());
  w->WriteTo(image.data());
  return image;
}

Result<TableImage> ParseTableImage(std::span<const std::byte> image) {
  if (image.size() < 24 || std::memcmp(image.data(), kMagic, 8) != 0) {
    return DataLoss("table image: bad magic or truncated header");
  }
  uint64_t version, dir_len;
  std::memcpy(&version, image.data() + 8, 8);
  std::memcpy(&dir_len, image.data() + 16, 8);
  if (version != kVersion) {
    return DataLoss("table image: version " + std::to_string(version) + ", expected " +
                    std::to_string(kVersion));
  }
  if (dir_len > image.size() - 24) return DataLoss("table image: directory overflows the image");
  const size_t head = Align8(24 + dir_len);
  if (head > image.size()) return DataLoss("table image: truncated");
  auto dir = nlohmann::json::parse(reinterpret_cast<const char*>(image.data() + 24),
                                   reinterpret_cast<const char*>(image.data() + 24 + dir_len),
                                   nullptr, false);
  if (dir.is_discarded() || !dir.contains("splits") || dir["splits"].size() != 3) {
    return DataLoss("table image: unreadable directory");
  }
  const auto data = image.subspan(head);
  TableImage out;
  out.pad_id_used = dir.value("pad_id_used", int64_t{-1});
  for (int i = 0; i < 3; ++i) {
    const auto& js = dir["splits"][i];
    if (js.is_null()) continue;
    ImageSplit s;
    s.blended = js["blended"].get<bool>();
    s.length = js["length"].get<int64_t>();
    for (const auto& jm : js["mids"]) {
      ImageMid m;
      m.prefix = jm["prefix"].get<std::string>();
      m.begin = jm["begin"].get<int64_t>();
      m.end = jm["end"].get<int64_t>();
      GRIDFEED_ASSIGN_OR_RETURN(m.tables.document_index,
                                ArrayAt<int32_t>(data, jm["document_index"], "document_index"));
      if (jm.contains("sample_index64")) {
        GRIDFEED_ASSIGN_OR_RETURN(m.tables.sample_index64,
                                  ArrayAt<int64_t>(data, jm["sample_index64"], "sample_index"));
      } else {
        GRIDFEED_ASSIGN_OR_RETURN(m.tables.sample_index32,
                                  ArrayAt<int32_t>(data, jm["sample_index32"], "sample_index"));
      }
      if (jm.contains("shuffle_index64")) {
        m.tables.shuffle_index_is_int64 = true;
        GRIDFEED_ASSIGN_OR_RETURN(m.tables.shuffle_index64,
                                  ArrayAt<int64_t>(data, jm["shuffle_index64"], "shuffle_index"));
      } else {
        GRIDFEED_ASSIGN_OR_RETURN(m.tables.shuffle_index32,
                                  ArrayAt<uint32_t>(data, jm["shuffle_index32"], "shuffle_index"));
      }
      if (std::find(out.prefixes.begin(), out.prefixes.end(), m.prefix) == out.prefixes.end()) {
        out.prefixes.push_back(m.prefix);
      }
      s.mids.push_back(std::move(m));
    }
    if (s.blended) {
      GRIDFEED_ASSIGN_OR_RETURN(s.dataset_index,
                                ArrayAt<int32_t>(data, js["dataset_index"], "dataset_index"));
      GRIDFEED_ASSIGN_OR_RETURN(
          s.dataset_sample_index,
          ArrayAt<int64_t>(data, js["dataset_sample_index"], "dataset_sample_index"));
    }
    out.splits[i] = std::move(s);
  }
  return out;
}

uint64_t TableImageDigest(std::span<const std::byte> image) {
  return XXH3_64bits(image.data(), image.size());
}

}  // namespace gridfeed::order
