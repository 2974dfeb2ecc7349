// Prints one line per kernel of the apps' pipelines (and some default schedules): its name and the
// hash of its generated source (C++ for the CPU and the GPU emulation; for CUDA the device code's
// CUDA source, NVRTC's cache key, and the host entry's C++). The ctest (same_in_every_process.cmake)
// runs this program several times, each after a different pattern of heap allocations, and fails
// unless every run prints the same lines: a source that depends on where the heap put the IR's nodes
// (a map keyed by address, iterated) would change the kernel-cache key and make every process compile
// its kernels again.
//   kernel_sources <allocations>   allocations: how many blocks to allocate (half of them freed)
//                                  before building the pipelines, 0 to 100000
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cora/cora.h"
#include "driver/KernelImpl.h"
#include "driver/Lowering.h"
#include "sparse/bsr_linear.h"
#include "transformer/encoder_def.h"
#include "trmm/trmm_def.h"
#include "trmm/trmm_gpu_def.h"
#include "util/Hash.h"
#include "vgemm/vgemm_def.h"
#include "vgemm/vgemm_gpu_def.h"

using namespace cora;

namespace {

/** Allocates `count` blocks of assorted sizes and frees every other one: later allocations (the
 * IR's nodes) fill the holes, so their addresses, and the order of those addresses, differ from a
 * run with another count. The kept half is returned so that it stays allocated. */
std::vector<void *> perturb_heap(long count) {
    std::vector<void *> blocks;
    for (long i = 0; i < count; i++)
        blocks.push_back(std::malloc(16 + (size_t)((i * 37) % 480)));
    for (long i = 0; i < count; i += 2) {
        std::free(blocks[(size_t)i]);
        blocks[(size_t)i] = nullptr;
    }
    return blocks;
}

void print_source(const std::string &name, const Pipeline &p, Target target) {
    CompileOptions opts;
    opts.target = target;
    std::string text;
    if (target == Target::Cuda) { // the CUDA source (NVRTC's cache key) and the host entry's C++
        CudaProgram cp = driver::cuda_program(driver::lower_for_cuda(p, opts), {}, opts);
        text = cp.source + "\n" + cp.host_source;
    } else {
        text = driver::prepare_cpu_kernel(p, opts, target == Target::Host ? "cpu" : "cuda-emulated")->source;
    }
    std::printf("%s %s\n", name.c_str(), util::content_hash(text).c_str());
}

const char *const kEncoderKernelNames[] = {"qkv", "attention", "out_norm", "ff1", "ff2_norm"};

} // namespace

int main(int argc, char **argv) {
    char *end = nullptr;
    const long count = argc == 2 ? std::strtol(argv[1], &end, 10) : -1;
    if (argc != 2 || *end != '\0' || count < 0 || count > 100000) {
        std::fprintf(stderr, "usage: %s <allocations: 0 to 100000>\n", argv[0]);
        return 2;
    }
    std::vector<void *> kept = perturb_heap(count);
    try {
        using apps::EncoderKernel;
        for (int which = 0; which < 5; which++)
            for (int variant = 0; variant < 5; variant++) {
                apps::EncoderOptions o;
                o.causal = variant == 1 || variant == 2;
                o.mask_full = variant == 2;
                o.gelu = variant == 3;
                o.gpu = variant == 4;
                auto def = apps::make_encoder_kernel((EncoderKernel)which, o);
                Pipeline p({def->output()}, "encoder");
                const std::string name =
                    std::string("encoder_") + kEncoderKernelNames[which] + "_" + std::to_string(variant);
                print_source(name, p, o.gpu ? Target::CudaEmulated : Target::Host);
                if (o.gpu) print_source(name + "_cuda", p, Target::Cuda);
            }
        {
            apps::EncoderOptions o;
            o.gpu = o.fp16 = true;
            auto def = apps::make_encoder_kernel(EncoderKernel::Qkv, o);
            print_source("encoder_qkv_fp16_cuda", Pipeline({def->output()}, "encoder"), Target::Cuda);
        }
        print_source("vgemm", Pipeline({apps::VGemm().C}, "vgemm"), Target::Host);
        print_source("trmm", Pipeline({apps::Trmm().C}, "trmm"), Target::Host);
        print_source("trmm_gpu", apps::TrmmGpu().pipeline(), Target::Cuda);
        print_source("vgemm_gpu", apps::VgemmGpu().pipeline(), Target::Cuda);
        print_source("vgemm_tensor_cores", apps::VgemmTensorCores().pipeline(), Target::Cuda);

        // Block-sparse layers chained (hand schedule), and unscheduled (the default's tiles).
        apps::TokenDims D(512);
        Tensor X = D.tokens("X", 256, 24);
        BsrMatrix W1("W1", 1024, 256, 32, 32, BlockOrder::ColumnMajor), W2("W2", 256, 1024, 8, 8);
        apps::BsrLinear h(
            "H", D, W1, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, true);
        apps::BsrLinear y(
            "Y", D, W2, [&](Expr b, Expr s, Expr k) { return h.Y(b, s, k); }, std::nullopt, false);
        print_source("bsr_layers", Pipeline({y.Y}, "bsr"), Target::Host);
        Dim n("n"), k("k");
        Func plain("plain", {{D.b, D.B}, {D.s, D.len(D.b)}, {n, W1.rows()}});
        plain.compute([&](Expr b, Expr s, Expr o) { return W1.row_times(k, o, [&](Expr kk) { return X(b, s, kk); }); });
        print_source("bsr_default", Pipeline({plain}, "bsr_default"), Target::Host);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kernel_sources: %s\n", e.what());
        return 1;
    }
    return kept.size() == (size_t)count ? 0 : 1;
}
