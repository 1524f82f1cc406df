#include "gridfeed/order/olmo/olmo_floor.h"

#include <cstring>
#include <vector>

#include "gridfeed/io/olmo_token_files.h"
#include "gridfeed/order/olmo/olmo_pipeline.h"

namespace gridfeed::order {
namespace {

template <typename T>
void Widen(const std::byte* raw, int64_t n, int64_t* out) {
  const T* p = reinterpret_cast<const T*>(raw);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(p[i]);
}

// OLMo: instance = seq_length tokens at (file, token offset) = the record's (first_document,
// first_offset).
class OlmoFloorImpl final : public AssemblyFloor {
 public:
  static Result<std::unique_ptr<AssemblyFloor>> Make(const config::JobOptions& o) {
    auto floor = std::unique_ptr<OlmoFloorImpl>(new OlmoFloorImpl());
    GRIDFEED_ASSIGN_OR_RETURN(
        floor->files_,
        io::OlmoTokenFiles::Open(o.data.olmo_paths, {}, OlmoTokenSize(o.data), o.data.seq_length));
    floor->tokens_ = o.data.seq_length;
    floor->raw_.resize(static_cast<size_t>(floor->tokens_) * 4);
    floor->out_.resize(static_cast<size_t>(floor->tokens_));
    return std::unique_ptr<AssemblyFloor>(std::move(floor));
  }

  int64_t Copy(Split, int64_t, const SampleRecord& r) override {
    const size_t item = static_cast<size_t>(files_.token_size());
    const auto bytes = files_.bytes(static_cast<size_t>(r.first_document));
    const size_t n = static_cast<size_t>(tokens_);
    std::memcpy(raw_.data(), bytes.data() + static_cast<size_t>(r.first_offset) * item, n * item);
    if (item == 2) {
      Widen<uint16_t>(raw_.data(), tokens_, out_.data());
    } else {
      Widen<uint32_t>(raw_.data(), tokens_, out_.data());
    }
    return out_[0] ^ out_[n - 1];
  }

  int64_t tokens_per_sample() const override { return tokens_; }

 private:
  OlmoFloorImpl() = default;
  io::OlmoTokenFiles files_;
  int64_t tokens_ = 0;
  std::vector<std::byte> raw_;
  std::vector<int64_t> out_;
};

}  // namespace

Result<std::unique_ptr<AssemblyFloor>> OlmoFloor(const config::JobOptions& options,
                                                 std::span<const std::byte> image) {
  (void)image;  // an instance is located by its SampleRecord alone
  return OlmoFloorImpl::Make(options);
}

Result<uint64_t> OlmoTableBytes(const config::JobOptions& options,
                                std::span<const std::byte> image) {
  (void)image;
  GRIDFEED_ASSIGN_OR_RETURN(OlmoPlan plan, PlanOlmoOrder(options));
  return static_cast<uint64_t>(plan.epochs) * static_cast<uint64_t>(plan.instances) *
         sizeof(uint32_t);
}

}  // namespace gridfeed::order
