/** \file Helpers that build messages and throw cora's exceptions. User mistakes go through
 * throw_compile_error / throw_runtime_error; CORA_CHECK guards cora's own invariants
 * (InternalError), building its message only when the check fails. */
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

template <typename... Args> [[noreturn]] void internal_failure(Args &&...args) {
    throw InternalError(concat("internal error: ", std::forward<Args>(args)...));
}

} // namespace cora

/** An invariant of cora itself: InternalError with the message when `cond` is false. The message
 * arguments are evaluated only then (a macro, so that passing checks cost one branch). */
#define CORA_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) ::cora::internal_failure(__VA_ARGS__);                                                            \
    } while (0)

namespace cora {} // namespace cora
