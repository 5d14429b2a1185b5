#pragma once
// Checkpoint scalars as text: info prints them, consolidate stores them in the safetensors
// "__metadata__", whose values must be strings.

#include <map>
#include <string>

#include "tessera/checkpoint/checkpoint.h"

namespace tessera::checkpoint_tool {

// "int64", "double" or "string".
const char* scalar_type(const checkpoint::Scalar& value);
// The value as a string: an integer in decimal, a double in the shortest form that parses back
// to the same bits (so a stored learning rate is not rounded), a string as it is.
std::string scalar_text(const checkpoint::Scalar& value);

}  // namespace tessera::checkpoint_tool
