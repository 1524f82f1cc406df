#include "gridfeed/order/table_image.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "gridfeed/core/kernel_copy.h"
#include "gridfeed/core/page_array.h"
#include "gridfeed/core/usable_cpus.h"

namespace gridfeed::order {
namespace {

constexpr char kMagic[8] = {'G', 'F', 'T', 'A', 'B', 'L', 'E', 'S'};
constexpr uint64_t kVersion = 2;  // 2: sources carry weights and samples per epoch
// Header: magic, then u64 version and u64 directory length; the directory follows.
constexpr size_t kVersionOffset = sizeof(kMagic);
constexpr size_t kDirLengthOffset = kVersionOffset + 8;
constexpr size_t kDirectoryOffset = kDirLengthOffset + 8;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }
constexpr size_t kImagePage = 4096, kPageAlignFrom = size_t{64} << 10;
size_t AlignPage(size_t n) { return (n + kImagePage - 1) / kImagePage * kImagePage; }

// Collects arrays and records where each will sit relative to the data section.
class Arrays {
 public:
  // Records where `v` goes. With `release`, CopyTo frees `v` right after copying it, so the
  // image and the tables are not both held in full (rank 0's peak stays near one copy).
  // `Array` is a std::vector or a PageArray.
  // Large arrays start on a page of the image (its data section starts on one), so the
  // kernel's copy from a page-aligned table is not 4K-aliased (core/kernel_copy.h).
  template <typename Array>
  nlohmann::json Add(Array& v, bool release) {
    using T = std::remove_cvref_t<decltype(*v.data())>;
    const size_t bytes = v.size() * sizeof(T);
    const size_t offset = bytes >= kPageAlignFrom ? AlignPage(size_) : Align8(size_);
    Part part{offset, v.size() * sizeof(T), reinterpret_cast<const std::byte*>(v.data()), {}, {}};
    if (release) {
      part.release = [&v] { Array gone(std::move(v)); };
      if constexpr (requires { v.ReleaseFront(size_t{0}); }) {
        part.copied = [&v](size_t bytes) { v.ReleaseFront(bytes / sizeof(T)); };
      }
    }
    parts_.push_back(std::move(part));
    size_ = offset + v.size() * sizeof(T);
    return nlohmann::json::array({offset, v.size()});
  }
  size_t size() const { return size_; }
  // The destination is a node window on 4 KiB pages that this process has not touched, so
  // the kernel copies (core/kernel_copy.h: on a VM with shadow page tables the first touch of
  // each page from here costs more than the copy), and a second thread copies the second half
  // of each large piece. The window of world rank 0's node is not prefaulted: it takes the
  // pages the tables' previous piece just gave back.
  static void Copy(std::byte* dst, const std::byte* src, size_t n) {
    CopyIntoUntouched(dst, src, n);
  }
  static void CopyOnTwoThreads(std::byte* dst, const std::byte* src, size_t n) {
    if (n < (size_t{8} << 20)) {
      Copy(dst, src, n);
      return;
    }
    const size_t half = n / 2;
    std::jthread other;
    try {
      other = std::jthread([=] { Copy(dst + half, src + half, n - half); });
    } catch (const std::system_error&) {
      Copy(dst + half, src + half, n - half);  // no thread to be had: copy it here
    }
    Copy(dst, src, half);
  }
  // Copies every array to `base` (gaps between them zeroed), releasing each after its copy
  // (a PageArray also piece by piece while it is copied).
  void CopyTo(std::byte* base) {
    constexpr size_t kPiece = size_t{64} << 20;
    size_t at = 0;
    for (auto& p : parts_) {
      std::memset(base + at, 0, p.offset - at);
      for (size_t done = 0; done < p.size;) {
        const size_t n = std::min(kPiece, p.size - done);
        CopyOnTwoThreads(base + p.offset + done, p.data + done, n);
        done += n;
        if (p.copied) p.copied(done);
      }
      at = p.offset + p.size;
      if (p.release) p.release();
    }
  }

 private:
  struct Part {
    size_t offset, size;
    const std::byte* data;
    std::function<void()> release;
    std::function<void(size_t bytes)> copied;  // after each piece: bytes copied so far
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
  if (!where[0].is_number_unsigned() || !where[1].is_number_unsigned()) {
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

// A node image's source tables: each sample spans one or more of its own documents.
Status ParseHeldSource(std::span<const std::byte> data, const nlohmann::json& jm,
                       GptTablesView* t) {
  t->held = true;
  if (jm.contains("held_first_doc64")) {
    GRIDFEED_ASSIGN_OR_RETURN(t->held_first_doc64,
                              ArrayAt<int64_t>(data, jm["held_first_doc64"], "held_first_doc"));
  } else {
    GRIDFEED_ASSIGN_OR_RETURN(t->held_first_doc32,
                              ArrayAt<int32_t>(data, jm.at("held_first_doc32"), "held_first_doc"));
  }
  GRIDFEED_ASSIGN_OR_RETURN(t->held_start_offset,
                            ArrayAt<int32_t>(data, jm.at("held_start_offset"), "held_offsets"));
  GRIDFEED_ASSIGN_OR_RETURN(t->held_end_offset,
                            ArrayAt<int32_t>(data, jm.at("held_end_offset"), "held_offsets"));
  const int64_t n = static_cast<int64_t>(t->held_start_offset.size());
  const size_t docs =
      t->held_first_doc64.empty() ? t->held_first_doc32.size() : t->held_first_doc64.size();
  if (t->held_end_offset.size() != static_cast<size_t>(n) || docs != static_cast<size_t>(n + 1) ||
      t->HeldFirstDoc(0) != 0 ||
      t->HeldFirstDoc(n) != static_cast<int64_t>(t->document_index.size())) {
    return DataLoss("table image: a node image's sample rows do not match its documents");
  }
  for (int64_t m = 0; m < n; ++m) {
    if (t->HeldFirstDoc(m + 1) <= t->HeldFirstDoc(m)) {
      return DataLoss("table image: held sample " + std::to_string(m) + " spans no document");
    }
  }
  return Status::Ok();
}

// A node image's runs of held positions: sorted, disjoint, in the split, one index per row.
Status ParseHeld(std::span<const std::byte> data, const nlohmann::json& js, SplitView* s) {
  s->held_only = true;
  GRIDFEED_ASSIGN_OR_RETURN(s->run_begin, ArrayAt<int64_t>(data, js.at("run_begin"), "run_begin"));
  GRIDFEED_ASSIGN_OR_RETURN(s->run_index, ArrayAt<int64_t>(data, js.at("run_index"), "run_index"));
  if (js.contains("held_sample")) {
    GRIDFEED_ASSIGN_OR_RETURN(s->held_sample,
                              ArrayAt<int64_t>(data, js["held_sample"], "held_sample"));
  }
  if (js.contains("source_index")) {
    GRIDFEED_ASSIGN_OR_RETURN(s->source_index,
                              ArrayAt<int32_t>(data, js["source_index"], "source_index"));
  }
  const size_t runs = s->run_begin.size();
  if (s->run_index.size() != runs + 1 || s->run_index[0] != 0) {
    return DataLoss("table image: a node image's runs do not match their indexes");
  }
  for (size_t r = 0; r < runs; ++r) {
    const int64_t len = s->run_index[r + 1] - s->run_index[r];
    const int64_t next = r + 1 < runs ? s->run_begin[r + 1] : s->length;
    if (len < 1 || s->run_begin[r] < 0 || len > next - s->run_begin[r]) {
      return DataLoss("table image: held run " + std::to_string(r) +
                      " is empty, out of order or outside the split");
    }
  }
  const auto n = static_cast<size_t>(s->run_index[runs]);
  const bool rows_match =
      s->blended
          ? s->dataset_index.size() == n && s->dataset_sample_index.size() == n &&
                s->held_sample.size() == n
          : s->sources.size() == 1 && static_cast<size_t>(s->sources[0].tables.num_samples()) == n;
  if (!rows_match) return DataLoss("table image: held positions do not match the tables");
  if (!s->source_index.empty() && s->source_index.size() != static_cast<size_t>(s->length)) {
    return DataLoss("table image: source_index does not cover the split");
  }
  for (const int32_t k : s->source_index) {
    if (k < 0 || static_cast<size_t>(k) >= s->sources.size()) {
      return DataLoss("table image: source_index names source " + std::to_string(k) + " of " +
                      std::to_string(s->sources.size()));
    }
  }
  for (const auto& source : s->sources) {
    if (!source.tables.held) return DataLoss("table image: a node image with a whole table");
  }
  if (s->blended) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t k = s->dataset_index[i];
      if (k < 0 || static_cast<size_t>(k) >= s->sources.size() || s->dataset_sample_index[i] < 0 ||
          s->dataset_sample_index[i] >= s->sources[k].tables.num_samples()) {
        return DataLoss("table image: held row " + std::to_string(i) + " names no table row");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

struct TableImageWriter::Plan {
  BuiltDatasets built;
  std::optional<HeldPositions> held;
  Arrays arrays;
  std::string directory;
  size_t head = 0;
};

std::unique_ptr<TableImageWriter> TableImageWriter::Create(BuiltDatasets&& built,
                                                           std::optional<HeldPositions> held) {
  std::unique_ptr<TableImageWriter> w(new TableImageWriter());
  w->plan_ = std::make_unique<Plan>();
  Plan& p = *w->plan_;
  p.built = std::move(built);  // the arrays below refer to the plan's own copies
  p.held = std::move(held);
  nlohmann::json splits = nlohmann::json::array();
  for (int i = 0; i < 3; ++i) {
    if (!p.built.splits[i]) {
      splits.push_back(nullptr);
      continue;
    }
    SplitDataset& sd = *p.built.splits[i];
    HeldPositions* held = p.held && static_cast<int>(p.held->split) == i ? &*p.held : nullptr;
    nlohmann::json js = {{"blended", sd.blended}, {"length", sd.length}};
    nlohmann::json mids = nlohmann::json::array();
    for (size_t k = 0; k < sd.mids.size(); ++k) {
      auto& m = sd.mids[k];
      auto& t = m.tables;
      nlohmann::json jm = {{"prefix", m.prefix},
                           {"begin", m.begin},
                           {"end", m.end},
                           {"samples_per_epoch", t.num_samples_per_epoch}};
      if (m.seq_length > 0) jm["seq_length"] = m.seq_length;
      if (held) {
        HeldSource& h = held->sources.at(k);
        jm["document_index"] = p.arrays.Add(h.document_index, true);
        if (h.first_doc64.empty()) {
          jm["held_first_doc32"] = p.arrays.Add(h.first_doc32, true);
        } else {
          jm["held_first_doc64"] = p.arrays.Add(h.first_doc64, true);
        }
        jm["held_start_offset"] = p.arrays.Add(h.start_offset, true);
        jm["held_end_offset"] = p.arrays.Add(h.end_offset, true);
        mids.push_back(jm);
        continue;
      }
      GRIDFEED_CHECK(!t.contents_released);  // written to files and given back: zeros
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
    js["weights"] = sd.blended ? nlohmann::json(sd.weights) : nlohmann::json::array();
    if (sd.blended) {
      js["dataset_index"] = p.arrays.Add(sd.blend.dataset_index, true);
      js["dataset_sample_index"] = p.arrays.Add(sd.blend.dataset_sample_index, true);
    }
    if (held) {
      js["run_begin"] = p.arrays.Add(held->run_begin, true);
      js["run_index"] = p.arrays.Add(held->run_index, true);
      if (!held->held_sample.empty()) js["held_sample"] = p.arrays.Add(held->held_sample, true);
      if (!held->source_index.empty()) {
        js["source_index"] = p.arrays.Add(held->source_index, true);
      }
    }
    splits.push_back(js);
  }
  nlohmann::json dir = {{"splits", splits}};
  if (p.held) dir["prefixes"] = p.held->prefixes;
  p.directory = dir.dump();
  // Blanks after the JSON put the data section on a page (the reader skips them).
  p.directory.append(
      AlignPage(kDirectoryOffset + p.directory.size()) - kDirectoryOffset - p.directory.size(),
      ' ');
  p.head = Align8(kDirectoryOffset + p.directory.size());
  return w;
}

TableImageWriter::TableImageWriter() = default;
TableImageWriter::~TableImageWriter() = default;

size_t TableImageWriter::size() const { return plan_->head + plan_->arrays.size(); }

void TableImageWriter::WriteTo(std::byte* dst) {
  Plan& p = *plan_;
  std::memcpy(dst, kMagic, sizeof(kMagic));
  const uint64_t version = kVersion, dir_len = p.directory.size();
  std::memcpy(dst + kVersionOffset, &version, 8);
  std::memcpy(dst + kDirLengthOffset, &dir_len, 8);
  std::memcpy(dst + kDirectoryOffset, p.directory.data(), p.directory.size());
  const size_t dir_end = kDirectoryOffset + p.directory.size();
  std::memset(dst + dir_end, 0, p.head - dir_end);
  p.arrays.CopyTo(dst + p.head);
}

std::vector<std::byte> SerializeTables(BuiltDatasets built) {
  auto w = TableImageWriter::Create(std::move(built));
  std::vector<std::byte> image(w->size());
  w->WriteTo(image.data());
  return image;
}

Result<TableView> ParseTableImage(std::span<const std::byte> image) {
  if (image.size() < kDirectoryOffset || std::memcmp(image.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLoss("table image: bad magic or truncated header");
  }
  uint64_t version, dir_len;
  std::memcpy(&version, image.data() + kVersionOffset, 8);
  std::memcpy(&dir_len, image.data() + kDirLengthOffset, 8);
  if (version != kVersion) {
    return DataLoss("table image: version " + std::to_string(version) + ", expected " +
                    std::to_string(kVersion));
  }
  if (dir_len > image.size() - kDirectoryOffset) {
    return DataLoss("table image: directory overflows the image");
  }
  const size_t head = Align8(kDirectoryOffset + dir_len);
  if (head > image.size()) return DataLoss("table image: truncated");
  const auto* dir_begin = reinterpret_cast<const char*>(image.data() + kDirectoryOffset);
  auto dir = nlohmann::json::parse(dir_begin, dir_begin + dir_len, nullptr, false);
  if (dir.is_discarded() || !dir.is_object() || !dir.contains("splits") ||
      !dir["splits"].is_array() || dir["splits"].size() != 3) {
    return DataLoss("table image: unreadable directory");
  }
  const auto data = image.subspan(head);
  TableView out;
  try {
    for (int i = 0; i < 3; ++i) {
      const auto& js = dir["splits"][i];
      if (js.is_null()) continue;
      SplitView s;
      s.blended = js.at("blended").get<bool>();
      s.length = js.at("length").get<int64_t>();
      s.weights = js.at("weights").get<std::vector<double>>();
      for (const auto& jm : js.at("mids")) {
        SourceView m;
        m.prefix = jm.at("prefix").get<std::string>();
        m.begin = jm.at("begin").get<int64_t>();
        m.end = jm.at("end").get<int64_t>();
        m.samples_per_epoch = jm.at("samples_per_epoch").get<int64_t>();
        m.seq_length = jm.value("seq_length", int64_t{0});
        if (m.seq_length < 0) return DataLoss("table image: negative seq_length");
        GRIDFEED_ASSIGN_OR_RETURN(
            m.tables.document_index,
            ArrayAt<int32_t>(data, jm.at("document_index"), "document_index"));
        if (jm.contains("held_start_offset")) {
          GRIDFEED_RETURN_IF_ERROR(ParseHeldSource(data, jm, &m.tables));
        } else if (jm.contains("sample_index64")) {
          GRIDFEED_ASSIGN_OR_RETURN(m.tables.sample_index64,
                                    ArrayAt<int64_t>(data, jm["sample_index64"], "sample_index"));
        } else {
          GRIDFEED_ASSIGN_OR_RETURN(
              m.tables.sample_index32,
              ArrayAt<int32_t>(data, jm.at("sample_index32"), "sample_index"));
        }
        if (m.tables.held) {
          // A node image's samples are in their own order: no shuffle index.
        } else if (jm.contains("shuffle_index64")) {
          m.tables.shuffle_index_is_int64 = true;
          GRIDFEED_ASSIGN_OR_RETURN(m.tables.shuffle_index64,
                                    ArrayAt<int64_t>(data, jm["shuffle_index64"], "shuffle_index"));
        } else {
          GRIDFEED_ASSIGN_OR_RETURN(
              m.tables.shuffle_index32,
              ArrayAt<uint32_t>(data, jm.at("shuffle_index32"), "shuffle_index"));
        }
        if (std::find(out.prefixes.begin(), out.prefixes.end(), m.prefix) == out.prefixes.end()) {
          out.prefixes.push_back(m.prefix);
        }
        s.sources.push_back(std::move(m));
      }
      if (s.blended) {
        GRIDFEED_ASSIGN_OR_RETURN(s.dataset_index,
                                  ArrayAt<int32_t>(data, js.at("dataset_index"), "dataset_index"));
        GRIDFEED_ASSIGN_OR_RETURN(
            s.dataset_sample_index,
            ArrayAt<int64_t>(data, js.at("dataset_sample_index"), "dataset_sample_index"));
      }
      if (js.contains("run_begin")) {
        GRIDFEED_RETURN_IF_ERROR(ParseHeld(data, js, &s));
      } else {
        for (const auto& source : s.sources) {
          if (source.tables.held) return DataLoss("table image: held tables in a whole split");
        }
      }
      out.splits[i] = std::move(s);
    }
    // A node image names every store of the whole order; its splits' are among them.
    if (dir.contains("prefixes")) {
      auto all = dir["prefixes"].get<std::vector<std::string>>();
      for (const auto& prefix : out.prefixes) {
        if (std::find(all.begin(), all.end(), prefix) == all.end()) {
          return DataLoss("table image: store '" + prefix + "' missing from the directory");
        }
      }
      out.prefixes = std::move(all);
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("table image: malformed directory (") + e.what() + ")");
  }
  return out;
}

namespace {

// XXH3-64 of `len` bytes at `p`. Untouched pages are read by the kernel through a small
// page-aligned buffer the caller reuses (core/kernel_copy.h); the same bytes hashed.
class BlockHasher {
 public:
  explicit BlockHasher(bool untouched) {
    if (!untouched || !state_) return;
    try {
      buffer_ = PageArray<std::byte>(kBuffer);
    } catch (const std::bad_alloc&) {
      // no buffer: hashed where it lies
    }
  }
  uint64_t operator()(const std::byte* p, size_t len) {
    if (buffer_.empty()) return XXH3_64bits(p, len);
    XXH3_64bits_reset(state_.get());
    for (size_t at = 0; at < len; at += kBuffer) {
      const size_t k = std::min(kBuffer, len - at);
      CopyOutOfUntouched(buffer_.data(), p + at, k);
      XXH3_64bits_update(state_.get(), buffer_.data(), k);
    }
    return XXH3_64bits_digest(state_.get());
  }

 private:
  static constexpr size_t kBuffer = size_t{512} << 10;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state_{XXH3_createState(),
                                                                  &XXH3_freeState};
  PageArray<std::byte> buffer_;
};

}  // namespace

uint64_t ImageDigest(std::span<const std::byte> image, bool untouched) {
  constexpr size_t kBlock = size_t{64} << 20;
  const size_t blocks = (image.size() + kBlock - 1) / kBlock;
  if (blocks <= 1) return BlockHasher(untouched)(image.data(), image.size());
  std::vector<uint64_t> parts(blocks);
  std::atomic<size_t> next{0};
  auto work = [&] {
    BlockHasher hash(untouched);
    for (size_t b; (b = next.fetch_add(1)) < blocks;) {
      parts[b] = hash(image.data() + b * kBlock, std::min(kBlock, image.size() - b * kBlock));
    }
  };
  {
    const size_t n = std::min<size_t>(blocks, std::clamp(UsableCpus(), 1u, 8u));
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < n; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // fewer threads: the same digest
      }
    }
    work();
  }
  return XXH3_64bits_withSeed(parts.data(), parts.size() * sizeof(uint64_t), image.size());
}

}  // namespace gridfeed::order
