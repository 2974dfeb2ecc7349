/** \file The tensor-core tile of a gpu_mma loop (ForKind::GpuMma): the nest such a loop must
 * head, and the per-lane fragments of the one mma.sync.m16n8k16 that computes it in CUDA.
 *
 * The nest, per thread, as every target but CUDA runs it:
 *
 *     for k in [m, m + 16) (gpu_mma):
 *       for ih in [0, 2): for jl in [0, 2):        (or jl outside ih; lets may sit in between)
 *         acc[c(ih, jl)] = acc[c(ih, jl)] + A[a(ih, k)] * B[b(t, jl, k)]
 *
 * in a block of 4 x 8 threads, t = threadIdx.x and g = threadIdx.y, so lane = t + 4 g; A and B
 * are float16 buffers, acc a float32 one; a(ih, k) does not read t (nor jl), b does not read g
 * (nor ih), c does not read k, and the four c(ih, jl) are different elements.
 *
 * Why one warp instruction computes it. Read the nest as a 16 x 8 x 16 product: row r = g + 8 ih,
 * column n = 2 t + jl, Â[r][k] = A[a(ih, k)] evaluated at g, B̂[k][n] = B[b(t, jl, k)] at
 * t = n / 2, jl = n % 2. Thread (t, g)'s four sums are D[g + 8 ih][2 t + jl], which is exactly
 * where mma.sync.m16n8k16.row.col puts D for lane t + 4 g: c0..c3 = (g, 2t), (g, 2t+1),
 * (g+8, 2t), (g+8, 2t+1), i.e. register 2 ih + jl (PTX ISA, "Matrix fragments for
 * mma.m16n8k16"). The lane must also supply its A and B fragments: A's registers a0..a3 hold
 * rows g, g+8, g, g+8 at k = 2t, 2t+1 (a0, a1) and 2t+8, 2t+9 (a2, a3) — its own rows, at ks other
 * lanes iterate, so a(ih, k) with k := m + 2t + h + 8q; B's b0, b1 hold column g at k = 2t, 2t+1
 * and 2t+8, 2t+9 — another lane's column, so b with t := g / 2, jl := g % 2 and the same k.
 * Those substitutions are only sound because a does not read t or jl and b does not read g or
 * ih; the matcher checks that on the indices with every let that depends on the nest's
 * variables or the thread indices inlined.
 *
 * What the whole kernel must also guarantee (lower/TensorCoreTiles.cpp checks it): every lane
 * of the warp reaches the instruction together (no condition or loop bound around it reads a
 * thread index; every thread axis bound exactly), the block is 4 x 8 (x z) threads. */
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace cora::ir {

struct MmaTile {
    const For *k_loop = nullptr;
    VarPtr t, g;                      ///< threadIdx.x (4), threadIdx.y (8)
    VarPtr ih, jl;                    ///< the register nest's loops (rows, columns)
    VarPtr acc, a, b;                 ///< the float32 sum and the float16 operands
    Expr acc_index, a_index, b_index; ///< with the dependent lets inlined
};

/** The tile headed by `k_loop`, a GpuMma loop inside the thread loops `thread_x` (t) and
 * `thread_y` (g); `lets` holds the lets in scope around it (variable to value). Throws
 * CompileError naming the loop and the rule the nest breaks. */
MmaTile match_mma_tile(const For *k_loop, const For *thread_x, const For *thread_y,
                       const std::map<const VarNode *, Expr> &lets);

/** What lane (t, g) loads and updates for the tile: the element indices of its A registers
 * a0..a3 (each two halves, low first), its B registers b0, b1, and its accumulators c0..c3. */
struct MmaFragments {
    Expr a[4][2], b[2][2], c[4];
};
MmaFragments mma_fragments(const MmaTile &tile);

/** For loading fragment registers `regs` (per register, the element indices of its low and high
 * halves, as functions of the lane's t and g: MmaFragments) from a shared tile with one ldmatrix
 * (m8n8, 16-bit, .x4 for 4 registers, .x2 for 2): the element index each lane passes (the row of
 * an 8 x 8 matrix it names), or undefined when the layout does not allow it (MmaTile.cpp says
 * what it requires, proved by the simplifier). */
Expr ldmatrix_rows(const std::vector<std::array<Expr, 2>> &regs, const Expr &t, const Expr &g);
/** The same with .trans: for B fragments whose columns (g) are contiguous instead of their ks. */
Expr ldmatrix_trans_rows(const std::vector<std::array<Expr, 2>> &regs, const Expr &t, const Expr &g);

} // namespace cora::ir
