/** \file Integer semantics shared by the simplifier, the interpreter and generated code:
 * floor division and floor modulo (for a non-zero divisor): a == (a / b) * b + a % b, and the
 * remainder has the sign of the divisor (never negative for b > 0), as in Python. */
#pragma once

#include <cstdint>

namespace cora::ir {

inline int64_t div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t mod_floor(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

} // namespace cora::ir
