// Runs GPU schedules on a CUDA device (ctest label `gpu`): random schedules of ragged ops and a
// GEMM with shared-memory panels, each against the reference. Without a device the program
// prints why and exits 77, which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include "common/ragged_testing.h"
#include "common/random_gpu_schedule.h"

#include <iostream>

using namespace cora;

TEST_CASE("random GPU schedules of ragged ops match the reference on the device", "[gpu]") {
    std::mt19937 rng(20261124); // the emulated differential test's schedules, run for real
    for (int trial = 0; trial < 40; trial++) {
        testing::RandomGpuCase c = testing::random_gpu_case(rng, "gpu_device_" + std::to_string(trial));
        INFO("trial " << trial << ": " << c.description);
        CudaKernel k = compile_cuda_kernel(c.pipeline);
        testing::check_against_reference(c.pipeline, k, c.inputs, c.bind, 40, 8, 100 + trial);
    }
}

TEST_CASE("a GEMM with shared-memory panels matches the reference on the device", "[gpu]") {
    Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), jo("jo"), ji("ji"), ko("ko"), ki("ki");
    Param M("M", 0, 300), N("N", 0, 300), K("K", 0, 300);
    Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
    Func C("C", {{i, M}, {j, N}});
    C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
    C.split(i, io, ii, 32).split(j, jo, ji, 32).split(k, ko, ki, 16);
    C.reorder({io, jo, ko, ii, ji, ki}).gpu_blocks(jo, io).gpu_threads(ji, ii).cache_write(ji);
    C.cache_read(A, ko).cache_read(Bm, ko);
    Pipeline p({C}, "gpu_device_gemm");
    CudaKernel kern = compile_cuda_kernel(p);
    testing::check_dense_gemm(p, kern, M, N, K, A, Bm, C,
                              {{0, 5, 3}, {1, 1, 1}, {32, 32, 16}, {33, 65, 17}, {300, 257, 300}, {64, 1, 48}});
}

int main(int argc, char **argv) {
    std::string why;
    if (!cuda_device_available(&why)) {
        std::cout << "SKIPPED: no CUDA device: " << why << "\n";
        return 77;
    }
    return Catch::Session().run(argc, argv);
}
