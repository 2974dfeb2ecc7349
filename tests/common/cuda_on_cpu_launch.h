// A hand-built module's kernel 0 launched as CUDA on CPU threads (codegen_cuda_on_cpu), for the
// pass tests of the CUDA printer: the source compiled by the JIT, the launch's status required 0.
#pragma once

#include <catch2/catch.hpp>

#include "codegen/CodeGen_CUDA.h"
#include "driver/JIT.h"
#include "ir/Module.h"

#include <string>

namespace cora::testing {

/** Launches kernel 0 of `m` over `grid` blocks of `threads` with `params` (pointers to the
 * kernel's arguments, in order); fails the test with the source and the error otherwise. */
inline void launch_on_cpu_threads(const ir::Module &m, const long long (&grid)[3], const long long (&threads)[3],
                                  void **params) {
    const std::string src = ir::codegen_cuda_on_cpu(m);
    INFO(src);
    driver::JitResult jit = driver::jit_compile(src, "cora_cuda_on_cpu_launch", driver::JitOptions{"", "", 0});
    auto launch = reinterpret_cast<int (*)(int, const long long *, const long long *, void **, char *, int)>(jit.entry);
    char error[256] = {0};
    const int status = launch(0, grid, threads, params, error, sizeof error);
    INFO(error);
    REQUIRE(status == 0);
}

} // namespace cora::testing
