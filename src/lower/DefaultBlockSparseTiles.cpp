/** \file Step 5 of the default schedule: the register tiles of a block-sparse product.
 *
 * A Func left unscheduled whose definition is one float32 sum of a BsrMatrix's row_times
 * (include/cora/Sparse.h),
 *
 *     Y(tok, n) = sum over k < blocks(n / br) * bc of X(tok, col(n / br, k / bc) * bc + k % bc)
 *                                                      * values(n / br, k / bc, n % br, k % bc),
 *
 * over one loop of tokens (step 1 fused the batch and the sentence dims into it, or the domain was
 * [tokens, n]) and a constant row n, gets the schedule of apps/sparse/bsr_linear.h, the block-sparse
 * recipe of the user guide, without its storage changes:
 *     tokens -> chunks of 24 (parallel) x token tiles; n -> block rows x [vector rows]; the row's
 *     present blocks (ko) x a block's columns (ki) inside the tile; the register tile of
 *     cora::bsr_register_tile (cora/BsrRegisterTile.h: 12 accumulators, e.g. 6 tokens x 32 rows
 *     for 32-row blocks with AVX-512, 12 x 8 for 8-row ones where X's rows do not alias in L1) as a
 *     cache_write at the tile loop, ki unrolled for blocks of at most 8 columns,
 *     specialize_interior at the tile loop.
 * Why: the plain default is a scalar loop that computes k / bc, k % bc and the block column per
 * multiply-add: 0.07x dense sgemm on a 768 x 3072 weight at 25% (32x32 blocks); the recipe is 2.8-3.9x.
 * A chunk's X rows stay in cache while the present blocks stream past; one X element, broadcast,
 * feeds a vector of outputs. Without pad_loop and padded storage (the user's buffers keep their
 * packed layout: zero copy) the last chunk's token tiles are guarded; specialize_interior gives
 * every whole tile a copy without the guard (with the guard inside the tile, clang kept the tile
 * in memory: 1.5x dense instead of 3.8x).
 * Where a block's rows are contiguous in `values` (BlockOrder::ColumnMajor, or any storage order
 * with the block's row dim innermost) the vector of outputs is one load of the user's buffer.
 * Row-major blocks (PyTorch's `values()` as it is; a block's columns innermost) would make it a
 * strided gather (0.10x dense); for them the block loop moves outside the token tiles, in groups
 * of blocks (up to 256 columns and 4,096 elements: 4 blocks of 32x32, 16 of 16x16, 32 of 8x8),
 * and each group's rows read by the tile are copied into a transposed stack tile (cache_read at
 * the group loop with the tile order (rb, j, c, r)) once per chunk of 192 tokens, amortised over
 * 32 tiles; the tile keeps its partial sums in registers across the group's blocks and in Y
 * between groups (Y zeroed first, the epilogue applied after the last group). The group's block
 * loop runs to min(group, blocks left) (the split's guard as the loop's bound: no branch).
 * With AVX-512 the tile holds a whole 32-row block row (6 x 32: 12 registers). Measured
 * (bench/block_sparse.sh, 3,430 tokens, 2 threads, AVX-512, against the faster of sgemm and
 * oneDNN in the same run): one block per group, 32x32 blocks at 25% ran at 2.0-2.5x dense over
 * the BERT shapes and 4096^3 and 8x8 blocks at 0.2-1.3x at 50-25% (column-major 1.2-2.8x), the
 * tile's loads and stores of its partial sums per 8-column block dominating; in groups, 2.5-3.8x
 * and 0.9-1.2x / 1.1-1.8x (4096^3 8x8 at 50%: 3,986 ms -> 665 ms). Group width, 768 x 3072 at
 * 50%, 8x8 blocks, one run: 32 / 128 / 256 / 512 columns 103 / 78 / 64 / 81 ms (dense 75-78 ms).
 * Large weights (over 16 MB dense) stream from memory once per chunk, so their chunks are 192
 * tokens (BsrTiling::for_matrix's rule, measured there).
 * Requires: step 1's fuse transforms in `fused` (the token loop `tokens`, then only n left).
 * Ensures: nullopt when the definition is not that shape; else the schedule (fuses included).
 * Tests: tests/correctness/block_sparse.cpp ("default schedule: a block-sparse product ...": the
 * nest at 128/256/512 bits, block shapes 32/16/8/4 and the ones left out, against the reference on
 * the edge-case batches and block patterns; and the random rounds with no schedule). */
#include <algorithm>
#include <tuple>

#include "analysis/Simplify.h"
#include "cora/BsrRegisterTile.h"
#include "cora/Tensor.h"
#include "ir/Epilogue.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"

namespace cora::ir {

namespace {

/** Tokens per chunk for row-major blocks: each chunk copies (transposes) every present block
 * once, so the copy is amortised over chunk / 6 token tiles (measured: 64, 96, 128 and 384 ran
 * 2-15% slower than 192 on a 768 x 3072 weight at 25%, 3,430 tokens, AVX-512). */
constexpr int64_t kRowMajorChunk = 192;
/** The vector registers a row-major tile may hold: a whole block row (6 tokens x 32 rows) when it
 * fits in this many, else a vector of rows as for column-major blocks. */
constexpr int64_t kTileRegisters = 12;
/** Row-major blocks are taken in groups of up to this many columns, whose copied tile holds at
 * most kRowMajorGroupElements floats (16 KB: 128 columns of 32-row blocks, 256 of 8- or 16-row
 * ones): the tile loads and stores its partial sums once per group, not once per block (the file
 * comment has the measurements; 32x32 blocks ran alike in groups of 128, 256 and 512 columns). */
constexpr int64_t kRowMajorGroupColumns = 256;
constexpr int64_t kRowMajorGroupElements = 4096;

/** `e` is v / c (Div) or v % c (Mod) with v the variable `v` and c the constant `c`. */
template <typename Op> bool is_var_op_const(const Expr &e, const VarNode *v, int64_t *c) {
    const Op *o = e.as<Op>();
    if (!o || o->a.get() != v) return false;
    const int64_t *k = as_const_int(o->b);
    if (!k || *k <= 0) return false;
    *c = *k;
    return true;
}

/** The position of the innermost physical storage dim of `t` in its domain, or -1 for storage
 * transforms other than reorders. */
int innermost_storage_dim(const TensorNode &t) {
    std::vector<size_t> positions(t.domain.size());
    for (size_t i = 0; i < positions.size(); i++)
        positions[i] = i;
    for (const StorageTransform &st : t.storage_transforms) {
        if (st.kind != StorageTransform::Kind::Reorder || st.order.size() != positions.size()) return -1;
        std::vector<size_t> next(positions.size());
        for (size_t k = 0; k < next.size(); k++)
            next[k] = positions[st.order[k]];
        positions = next;
    }
    return positions.empty() ? -1 : (int)positions.back();
}

/** The bytes between consecutive tokens' rows of the operand read by `dense` along the reduction
 * `k`, or 0 when unknown: its storage's innermost extent, when k indexes that innermost dim, no
 * other index is a constant or uses k (X(tok, 0, k) rows are further apart) and its storage
 * transforms only fuse outer dims (the packed tokens of fuse_storage keep the rows as they are;
 * a split or reorder moves them). A heuristic for the tile's speed only: a read with its token
 * indices permuted (X(s, b, k) over [b, s, k]) or of a Func inlined later is taken at that
 * storage's row stride too. */
int64_t x_row_bytes(const Access &dense, const VarNode *k) {
    const TensorNode &x = *dense.tensor;
    if (dense.indices.empty() || !uses_var(dense.indices.back(), k) || x.storage.size() != dense.indices.size())
        return 0;
    for (size_t i = 0; i + 1 < dense.indices.size(); i++)
        if (as_const_int(simplify(dense.indices[i])) || uses_var(dense.indices[i], k)) return 0;
    size_t dims = x.storage.size();
    for (const StorageTransform &st : x.storage_transforms) {
        if (st.kind != StorageTransform::Kind::Fuse || st.position + 2 >= dims) return 0;
        dims--;
    }
    const int64_t *extent = as_const_int(simplify(x.storage.back().extent));
    return extent ? *extent * (x.type.bits / 8) : 0;
}

} // namespace

std::optional<front::Schedule> block_sparse_tiles(const TensorNode &f, const front::Schedule &fused,
                                                  const DimPtr &tokens, const DefaultScheduleTarget &target) {
    using front::LoopTransform;
    if (target.target != Target::Host || target.vector_bits < 128 || !f.type.is_float() || f.type.bits != 32)
        return std::nullopt;
    const Reduce *red = scheduled_reduce(f.value);
    if (!red || red->op != ReduceOp::Sum || !red->var->dim) return std::nullopt;
    const LayoutDim &row = f.domain.back();
    const int64_t *rows = as_const_int(simplify(row.extent));
    if (!rows) return std::nullopt;
    const VarNode *n = row.dim->var.get(), *k = red->var.get();
    // The values read: values(n / br, k / bc, n % br, k % bc), a block's rows contiguous.
    int64_t br = 0, bc = 0;
    const Access *values = nullptr, *dense = nullptr;
    bool other_reads = false;
    visit_exprs(red->body, [&](const Expr &x) {
        const Access *a = x.as<Access>();
        if (!a) return;
        int64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
        if (!values && a->indices.size() == 4 && is_var_op_const<Div>(a->indices[0], n, &c0) &&
            is_var_op_const<Div>(a->indices[1], k, &c1) && is_var_op_const<Mod>(a->indices[2], n, &c2) &&
            is_var_op_const<Mod>(a->indices[3], k, &c3) && c0 == c2 && c1 == c3) {
            values = a;
            br = c0;
            bc = c1;
        } else if (!dense && a->tensor->type.is_float() &&
                   std::any_of(a->indices.begin(), a->indices.end(), [&](const Expr &i) { return uses_var(i, k); })) {
            dense = a;
        } else if (a->tensor->type.is_float()) {
            other_reads = true;
        }
    });
    if (!values || !dense || other_reads) return std::nullopt;
    // Row-major blocks (a block's columns contiguous: PyTorch's order) get a transposed copy of
    // each block's vector rows (see the file comment).
    const int innermost = innermost_storage_dim(*values->tensor);
    if (innermost != 2 && innermost != 3) return std::nullopt;
    const bool row_major = innermost == 3;
    int64_t chunk = row_major ? kRowMajorChunk : 24;
    const int64_t *cols = as_const_int(simplify(dense->tensor->domain.back().extent));
    if (cols && *rows * *cols * 4 > (int64_t{16} << 20)) chunk = std::max<int64_t>(chunk, 192);
    // Column-major blocks: cora::bsr_register_tile's tile, the hand schedule's (its header has the
    // rule and the measurements). Row-major blocks: 6 tokens x a vector of 16 rows (8 with 128-bit
    // vectors), the whole block row in the tile where it fits kTileRegisters (below).
    const auto [tile_tokens, vector_rows] =
        row_major ? BsrRegisterTile{6, std::min<int64_t>(br, target.vector_bits >= 256 ? 16 : 8)}
                  : bsr_register_tile(br, x_row_bytes(*dense, k), chunk, target.vector_bits);
    if (br < 4 || br % vector_rows != 0 || *rows % br != 0) return std::nullopt;

    front::Schedule s = fused;
    auto split = [&](const DimPtr &d, int64_t factor, const char *outer_suffix, const char *inner_suffix) {
        DimPtr outer = Dim(d->name + outer_suffix).node(), inner = Dim(d->name + inner_suffix).node();
        s.transforms.push_back(
            LoopTransform{LoopTransform::Kind::Split, d, outer, inner, nullptr, factor, nullptr, Expr()});
        return std::make_pair(outer, inner);
    };
    DimPtr kd = default_reduction_loop(*red);
    s.reduction_loop = kd;
    auto [chunks, in_chunk] = split(tokens, chunk, "_c", "_t");
    auto [tiles, tile_rows] = split(in_chunk, tile_tokens, "_o", "_i");
    auto [block_rows, in_block] = split(row.dim, br, "_b", "_r");
    DimPtr vector = in_block, vector_blocks;
    if (vector_rows < br) std::tie(vector_blocks, vector) = split(in_block, vector_rows, "_o", "_i");
    auto [blocks, block_cols] = split(kd, bc, "_o", "_i");
    s.annotations = {{chunks, ForKind::Parallel}, {tile_rows, ForKind::Unrolled}, {vector, ForKind::Vectorized}};
    s.order = {chunks, block_rows};
    // Row-major blocks: the blocks of a row in groups (kRowMajorGroupColumns); each group
    // is copied (transposed) once per chunk and the tile keeps its partial sums in registers
    // across the group's blocks (see the file comment).
    DimPtr groups = blocks, group_blocks;
    const int64_t group = std::min(kRowMajorGroupColumns / bc, kRowMajorGroupElements / (br * bc));
    if (row_major && group > 1) std::tie(groups, group_blocks) = split(blocks, group, "_g", "_j");
    std::vector<DimPtr> block_loops; // inside the token tile: the group's blocks, a block's columns
    if (group_blocks) block_loops.push_back(group_blocks);
    block_loops.push_back(block_cols);
    if (!row_major) {
        if (vector_blocks) s.order.push_back(vector_blocks);
        s.order.insert(s.order.end(), {tiles, blocks, block_cols, tile_rows, vector});
    } else if (vector_blocks && tile_tokens * br * 32 <= kTileRegisters * target.vector_bits) {
        // The whole block row in the tile (6 x 32 rows: 12 of AVX-512's 32 registers): each block
        // copied once per chunk, and the chunk's X columns read once per block row, not per vector.
        s.order.insert(s.order.end(), {groups, tiles});
        s.order.insert(s.order.end(), block_loops.begin(), block_loops.end());
        s.order.insert(s.order.end(), {tile_rows, vector_blocks, vector});
        s.annotations.emplace_back(vector_blocks, ForKind::Unrolled);
    } else {
        if (vector_blocks) s.order.push_back(vector_blocks);
        s.order.insert(s.order.end(), {groups, tiles});
        s.order.insert(s.order.end(), block_loops.begin(), block_loops.end());
        s.order.insert(s.order.end(), {tile_rows, vector});
    }
    // Row-major blocks: the group's rows read inside the tile (a vector_blocks x vector box, or
    // one vector, of each of its blocks), copied with the block's dims swapped, so a vector of
    // rows is one load.
    if (row_major) s.cache_reads.push_back(front::Schedule::CacheRead{values->tensor, groups, {0, 1, 3, 2}});
    if (bc <= 8) s.annotations.emplace_back(block_cols, ForKind::Unrolled);
    s.cache_write_at = tiles;
    s.interior_at = tiles;
    return s;
}

} // namespace cora::ir
