// Tensor-core tiles (Func::gpu_mma): a 16-step reduction loop over a 2 x 2 register nest runs in
// CUDA as one mma.sync.m16n8k16 per warp. Without a GPU each schedule is checked three ways: the
// nest as loops (Target::CudaEmulated), the CUDA source with the warp instruction emulated on CPU
// threads (codegen_cuda_on_cpu: each element of a lane's fragments is read where the PTX ISA's
// layout puts it, so a wrong fragment index fails here), and the source compiled by NVRTC for
// sm_80 and sm_90 with the instruction in the PTX. tests/gpu/gpu_run.cpp runs it on a device.
#include "common/cuda_on_cpu.h"
#include "common/gemm_schedules.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "vgemm/vgemm_gpu_def.h"

#include <functional>

using namespace cora;
using Catch::Matchers::Contains;
using testing::count_occurrences;
using testing::emulated;
using testing::TileGemm;

namespace {

/** `p` (a GEMM over gemm's tensors) against the reference, emulated and as CUDA on CPU threads. */
void check_tiles(const Pipeline &p, const testing::TileGemm &gemm) {
    const std::vector<std::tuple<int, int, int>> sizes = {{0, 1, 1}, {1, 1, 0}, {1, 1, 1}, {2, 3, 2}, {3, 1, 5}};
    testing::check_dense_gemm_kernels(p, gemm.Mb, gemm.Nb, gemm.Kb, gemm.A, gemm.B, gemm.C, sizes,
                                      p.compile(emulated()), testing::cuda_on_cpu(p));
}

/** The CUDA source of `p` compiled for sm_80 and sm_90, with tensor-core instructions in its PTX. */
CudaProgram require_mma_compiles(const Pipeline &p) {
    return testing::require_cuda_compiles(p, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
}

std::string compile_error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const CompileError &e) {
        return e.what();
    }
    return "(no CompileError)";
}

} // namespace

TEST_CASE("a tensor-core GEMM: the nest as loops, the warp instruction emulated on CPU threads, and PTX with mma.sync",
          "[gpu][mma]") {
    for (Type out : {Float32, Float16}) {
        DYNAMIC_SECTION("output " << out.str()) {
            TileGemm gemm(Float16, out);
            gemm.schedule();
            Pipeline p({gemm.C}, "mma_gemm_" + out.str());
            CudaProgram cp = require_mma_compiles(p);
            INFO(cp.kernel_ir[0]);
            REQUIRE_THAT(cp.kernel_ir[0], Contains("gpu_mma for ki in [0, 0 + 16)"));
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory A_cache[float16 * 1024]")); // 2 stages
            INFO(cp.source);
            // Per thread: 4 tiles of 8 columns, 4 sums each; one instruction per tile and panel.
            REQUIRE_THAT(cp.source, Contains("float C_tile_[int64_t(16)];") || Contains("float C_tile_[int32_t(16)];"));
            REQUIRE(count_occurrences(cp.source, "cora_mma_m16n8k16(C_tile_[") == 1);
            // The fragments from the shared tiles by ldmatrix, one per operand and instruction:
            // A's four 8 x 8 matrices (rows g and g + 8 at k 0-7 and 8-15, each row 8 contiguous
            // halves), B's two transposed (the tile is k-major: a column's halves are 64 apart,
            // and the lanes' columns g contiguous). Lane (t, g) passes the row t + 4 (g % 2) of
            // matrix g / 2: its k-panel's stage, rows 16 halves apart.
            REQUIRE(count_occurrences(cp.source, "cora_ldmatrix_x4(cora_mma_a0, cora_mma_a1, cora_mma_a2, "
                                                 "cora_mma_a3, &A_cache_[") == 1);
            REQUIRE(count_occurrences(cp.source, "cora_ldmatrix_x2_trans(cora_mma_b0, cora_mma_b1, &B_cache_[") == 1);
            REQUIRE(count_occurrences(cp.source, "= cora_pack_half2(") == 0);
            // A's fragment does not depend on the warp's column tile nj: loaded once before that
            // loop, not once per tile.
            const size_t a_load = cp.source.find("cora_ldmatrix_x4(cora_mma_a0"),
                         nj_loop = cp.source.find(" nj_ = ", cp.source.find("// the A fragment of loop ki, the same "
                                                                            "for every nj"));
            REQUIRE(a_load != std::string::npos);
            REQUIRE(nj_loop != std::string::npos);
            REQUIRE(a_load < nj_loop);
            for (const CudaBinary &b : cp.binaries) {
                REQUIRE_THAT(b.ptx, Contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
                REQUIRE_THAT(b.ptx, Contains("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"));
            }
            check_tiles(p, gemm);
        }
    }
}

TEST_CASE("tensor-core tiles under other schedules: nest order, unrolled registers, warps along j, operands in "
          "global memory, operands in the other roles",
          "[gpu][mma]") {
    SECTION("columns outside rows, both unrolled") {
        TileGemm s;
        s.split_tiles();
        s.C.reorder({s.io, s.jo, s.ko, s.iw, s.g, s.t, s.nj, s.ki, s.jl, s.ih}).gpu_blocks(s.jo, s.io);
        s.C.gpu_threads(s.t, s.g, s.iw).cache_read(s.A, s.ko).cache_read(s.B, s.ko).cache_write(s.jo);
        s.C.unroll(s.ih).unroll(s.jl).gpu_mma(s.ki);
        Pipeline p({s.C}, "mma_jl_outside");
        require_mma_compiles(p);
        check_tiles(p, s);
    }
    SECTION("warps along j, two row tiles per warp") {
        TileGemm s;
        s.C.split(s.i, s.io, s.ii, 32).split(s.ii, s.im, s.iw, 16).split(s.iw, s.ih, s.g, 8);
        s.C.split(s.j, s.jo, s.ji, 32).split(s.ji, s.jw, s.jm, 8).split(s.jm, s.t, s.jl, 2).split(s.k, s.ko, s.ki, 16);
        s.C.reorder({s.io, s.jo, s.ko, s.jw, s.g, s.t, s.im, s.ki, s.ih, s.jl}).gpu_blocks(s.jo, s.io);
        s.C.gpu_threads(s.t, s.g, s.jw).cache_read(s.A, s.ko).cache_read(s.B, s.ko).cache_write(s.jo).gpu_mma(s.ki);
        Pipeline p({s.C}, "mma_warps_j");
        CudaProgram cp = require_mma_compiles(p);
        REQUIRE_THAT(cp.source, Contains("float C_tile_[int64_t(8)];") || Contains("float C_tile_[int32_t(8)];"));
        check_tiles(p, s);
    }
    SECTION("operands read from global memory, a per-warp register tile") {
        TileGemm s;
        s.split_tiles();
        s.C.reorder({s.io, s.jo, s.iw, s.g, s.t, s.nj, s.ko, s.ki, s.ih, s.jl}).gpu_blocks(s.jo, s.io);
        s.C.gpu_threads(s.t, s.g, s.iw).cache_write(s.nj).gpu_mma(s.ki);
        Pipeline p({s.C}, "mma_global");
        CudaProgram cp = require_mma_compiles(p);
        // ldmatrix reads shared memory only: the fragments are packed from single halves.
        REQUIRE_THAT(cp.source, Contains("cora_pack_half2(A_["));
        REQUIRE_THAT(cp.source, !Contains("cora_ldmatrix_x4(cora_mma_a0"));
        check_tiles(p, s);
    }
    SECTION("C = B^T A^T: the first operand read at the thread's columns") {
        // C[j, i] = sum_k B[k, j] * A[i, k], with the rows of C from B: the matcher gives A's
        // role (the rows' operand) to B.
        TileGemm s;
        Func Ct("Ct", {{s.j, s.N}, {s.i, s.M}});
        Ct.compute([&](Expr y, Expr x) { return sum(s.k, s.K, s.B(s.k, y) * s.A(x, s.k)); });
        Ct.split(s.j, s.jo, s.ji, 32).split(s.ji, s.jw, s.jm, 16).split(s.jm, s.ih, s.g, 8);
        Ct.split(s.i, s.io, s.ii, 32).split(s.ii, s.nj, s.im, 8).split(s.im, s.t, s.jl, 2).split(s.k, s.ko, s.ki, 16);
        Ct.reorder({s.jo, s.io, s.ko, s.jw, s.g, s.t, s.nj, s.ki, s.ih, s.jl}).gpu_blocks(s.io, s.jo);
        Ct.gpu_threads(s.t, s.g, s.jw).cache_read(s.A, s.ko).cache_read(s.B, s.ko).cache_write(s.io).gpu_mma(s.ki);
        Pipeline p({Ct}, "mma_transposed");
        CudaProgram cp = require_mma_compiles(p);
        INFO(cp.source);
        // B's tile in A's role is k-major, so the rows' halves are not adjacent: A's fragments are
        // packed; A's tile in B's role has each column's k contiguous: ldmatrix without .trans.
        REQUIRE_THAT(cp.source, Contains("= cora_pack_half2(B_cache_["));
        REQUIRE_THAT(cp.source, Contains("cora_ldmatrix_x2(cora_mma_b0, cora_mma_b1, &A_cache_["));
        const std::vector<std::tuple<int, int, int>> sizes = {{1, 1, 1}, {2, 3, 2}, {0, 2, 1}};
        for (auto [mb, nb, kb] : sizes) {
            INFO("Mb " << mb << " Nb " << nb << " Kb " << kb);
            RaggedShape shape;
            shape.set(s.Mb, mb).set(s.Nb, nb).set(s.Kb, kb);
            Buffer a = Buffer::alloc(s.A, shape), b = Buffer::alloc(s.B, shape);
            testing::fill_random(a, 3);
            testing::fill_random(b, 4);
            const std::vector<double> expected = reference_evaluate(p, shape, {{s.A, &a}, {s.B, &b}})[0];
            for (int way = 0; way < 2; way++) {
                Buffer c = Buffer::alloc(Ct, shape);
                if (way == 0)
                    p.compile(emulated()).run(shape, {{s.A, a}, {s.B, b}, {Ct, c}});
                else
                    testing::cuda_on_cpu(p).run(shape, {{s.A, a}, {s.B, b}, {Ct, c}});
                testing::require_close(c, expected);
            }
        }
    }
}

TEST_CASE("tensor-core schedules that cannot be one warp instruction are compile errors", "[gpu][mma][error]") {
    auto lower = [](const Func &f) { compile_cuda(Pipeline({f}, "mma_error"), {}); };
    SECTION("not a reduction loop, not 16 steps") {
        TileGemm s;
        s.C.split(s.i, s.io, s.ii, 32);
        REQUIRE_THAT(compile_error_of([&] { s.C.gpu_mma(s.io); }), Contains("is not a loop of the reduction"));
        TileGemm e;
        e.split_tiles(8);
        e.C.reorder({e.io, e.jo, e.ko, e.iw, e.g, e.t, e.nj, e.ki, e.ih, e.jl}).gpu_blocks(e.jo, e.io);
        e.C.gpu_threads(e.t, e.g, e.iw).cache_write(e.jo).gpu_mma(e.ki);
        REQUIRE_THAT(compile_error_of([&] { lower(e.C); }),
                     Contains("gpu_mma in Func 'C': loop 'ki' has extent 8; a tensor-core step "
                              "(mma.sync.m16n8k16) reduces over exactly 16"));
    }
    SECTION("float32 operands") {
        TileGemm s(Float32);
        s.schedule();
        REQUIRE_THAT(compile_error_of([&] { lower(s.C); }),
                     Contains("gpu_mma loop 'ki': the operand 'A_cache' is float32; mma.sync.m16n8k16 multiplies "
                              "float16"));
    }
    SECTION("threads bound the other way round") {
        TileGemm s;
        s.split_tiles();
        s.C.reorder({s.io, s.jo, s.ko, s.iw, s.g, s.t, s.nj, s.ki, s.ih, s.jl}).gpu_blocks(s.jo, s.io);
        s.C.gpu_threads(s.g, s.t, s.iw).cache_write(s.jo).gpu_mma(s.ki);
        REQUIRE_THAT(compile_error_of([&] { lower(s.C); }),
                     Contains("gpu_mma loop 'ki': gpu_threads.x (loop 'g') has extent 8; it must be 4"));
    }
    SECTION("sizes that are not whole tiles: a bound check would split the warp") {
        Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), ih("ih"), g("g"), jo("jo"), ji("ji"), t("t"), jl("jl"),
            ko("ko"), ki("ki");
        Param M("M", 0, 100), N("N", 0, 100), K("K", 0, 100);
        Tensor A("A", {{i, M}, {k, K}}, Float16), B("B", {{k, K}, {j, N}}, Float16);
        Func C("C", {{i, M}, {j, N}});
        C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * B(k, y)); });
        C.split(i, io, ii, 16).split(ii, ih, g, 8).split(j, jo, ji, 8).split(ji, t, jl, 2).split(k, ko, ki, 16);
        C.reorder({io, jo, g, t, ko, ki, ih, jl}).gpu_blocks(jo, io).gpu_threads(t, g).cache_write(jo).gpu_mma(ki);
        const std::string e = compile_error_of([&] { lower(C); });
        REQUIRE_THAT(e, Contains("gpu_mma loop 'ki': "));
        REQUIRE_THAT(e, Contains("every lane of a warp must reach the instruction"));
    }
    SECTION("an operand read at both the thread's rows and its columns") {
        TileGemm s;
        Tensor W("W", {{s.i, s.M}, {s.j, s.N}, {s.k, s.K}}, Float16);
        Func D("D", {{s.i, s.M}, {s.j, s.N}});
        D.compute([&](Expr x, Expr y) { return sum(s.k, s.K, s.A(x, s.k) * W(x, y, s.k)); });
        D.split(s.i, s.io, s.ii, 32).split(s.ii, s.iw, s.im, 16).split(s.im, s.ih, s.g, 8);
        D.split(s.j, s.jo, s.ji, 32).split(s.ji, s.nj, s.jm, 8).split(s.jm, s.t, s.jl, 2).split(s.k, s.ko, s.ki, 16);
        D.reorder({s.io, s.jo, s.ko, s.iw, s.g, s.t, s.nj, s.ki, s.ih, s.jl}).gpu_blocks(s.jo, s.io);
        D.gpu_threads(s.t, s.g, s.iw).cache_write(s.jo).gpu_mma(s.ki);
        REQUIRE_THAT(compile_error_of([&] { lower(D); }),
                     Contains("gpu_mma loop 'ki': the operands do not follow the fragment layout"));
    }
    SECTION("the host CPU target") {
        TileGemm s;
        s.C.split(s.k, s.ko, s.ki, 16).gpu_mma(s.ki);
        REQUIRE_THAT(compile_error_of([&] { Pipeline({s.C}, "mma_cpu").compile(); }),
                     Contains("loop 'ki' is bound to gpu_mma, but the target is the host CPU"));
    }
}

TEST_CASE("vgemm on tensor cores: matrices of different tile counts, empty ones, blocks past a matrix's tiles",
          "[gpu][mma]") {
    const int64_t tile = GENERATE(32, 128);
    INFO("tile " << tile);
    apps::VgemmTensorCores v(tile);
    Pipeline p = v.pipeline();
    CudaProgram cp = require_mma_compiles(p);
    INFO(cp.kernel_ir[0]);
    REQUIRE_THAT(cp.kernel_ir[0], Contains("gpu_mma for ri in [0, 0 + 16)"));
    Kernel emulated_kernel = p.compile(emulated());
    Kernel on_cpu = testing::cuda_on_cpu(p);
    const std::vector<std::vector<std::array<int32_t, 3>>> batches = {
        {{1, 1, 1}}, {{2, 1, 3}, {0, 2, 1}, {1, 3, 0}, {3, 2, 2}}, {{1, 2, 1}, {2, 1, 2}}, {{5, 5, 2}, {1, 4, 1}}};
    for (const auto &tiles : batches) {
        RaggedShape s;
        v.bind(s, tiles);
        INFO("matrices " << tiles.size() << ", first " << tiles[0][0] << " x " << tiles[0][1] << " x " << tiles[0][2]);
        Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s);
        testing::fill_random(x, 11);
        testing::fill_random(y, 12);
        const std::vector<double> expected = reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0];
        Buffer c1 = Buffer::alloc(v.C, s), c2 = Buffer::alloc(v.C, s);
        emulated_kernel.run(s, {{v.X, x}, {v.Y, y}, {v.C, c1}});
        testing::require_close(c1, expected);
        on_cpu.run(s, {{v.X, x}, {v.Y, y}, {v.C, c2}});
        testing::require_close(c2, expected);
    }
}
