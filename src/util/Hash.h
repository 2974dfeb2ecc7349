/** \file A 128-bit content hash (two independent FNV-1a lanes) for the kernel cache. */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cora::util {

/** 32 hex digits identifying `text`; stable across runs and machines. */
std::string content_hash(std::string_view text);

} // namespace cora::util
