// Python's float() on text, for the weights of Megatron's data-path lists (which Megatron reads
// with float()). Pure; thread safe.
#pragma once

#include <optional>
#include <string>

namespace gridfeed {

// The value Python's float(text) gives, or none where it raises ValueError: surrounding
// whitespace, a sign, '_' between digits, nan/inf/infinity (any case), exponents.
std::optional<double> ParsePythonFloat(const std::string& text);

}  // namespace gridfeed
