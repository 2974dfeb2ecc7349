/** \file Integer semantics shared by the simplifier, the interpreter and generated code:
 * floor division and Euclidean modulo (for a non-zero divisor). */
#pragma once

#include <cstdint>

namespace cora::ir {

inline int64_t div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t mod_euclid(int64_t a, int64_t b) {
    int64_t r = a % b;
    return r < 0 ? (b < 0 ? r - b : r + b) : r;
}

}  // namespace cora::ir
