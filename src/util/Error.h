/** \file Helpers that build messages and throw cora's exceptions. User mistakes go through
 * throw_compile_error / throw_runtime_error; internal_check guards cora's own invariants. */
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "cora/Error.h"

namespace cora {

template <typename... Args> std::string concat(Args &&...args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

template <typename... Args> [[noreturn]] void throw_compile_error(Args &&...args) {
    throw CompileError(concat(std::forward<Args>(args)...));
}

template <typename... Args> [[noreturn]] void throw_runtime_error(Args &&...args) {
    throw RuntimeError(concat(std::forward<Args>(args)...));
}

template <typename... Args> void internal_check(bool cond, Args &&...args) {
    if (!cond) throw InternalError(concat("internal error: ", std::forward<Args>(args)...));
}

} // namespace cora
