// SHA-256 of a byte string, hex encoded (to check files against the digests in corpora.json).
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace gridfeed::testing {

std::string Sha256Hex(std::span<const std::byte> data);

}  // namespace gridfeed::testing
