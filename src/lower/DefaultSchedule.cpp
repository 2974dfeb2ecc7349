/** \file Step: the schedule of an op the user left unscheduled.
 *
 * A Func with no loop schedule at all (no transform, order, annotation, scheduled reduction, cache,
 * op split, compute_at or hfuse, and no other op computed at one of its loops) gets one that does
 * what a plain -O3 loop over packed tokens does, so that writing no schedule never loses to it:
 *  1. Fuse the outer loops into one parallel loop: the outermost loop (loop-invariant extent) is
 *     fused with the next while that one's extent uses only the loops fused so far; the innermost
 *     loop only in a 2-D domain, when its extent is not a constant (else it stays the vector
 *     loop) and, when it is ragged, its fusion maps cancel out of the body (fusion_maps_cancel:
 *     else the loop over rows stays, parallel; maps read and checked per element cost 3-28x).
 *     At most one ragged fuse: a second would need fusion maps with one entry per (row, column)
 *     pair, and so would a ragged innermost loop under several fused ones (K transposed
 *     per head, [b, h, d, len(b)]: one entry per element, read per element). A ragged fuse
 *     over packed storage costs nothing at run time (the fusion maps cancel against the prefix
 *     sums of the storage offsets); elsewhere the prelude builds maps with one entry per row.
 *     Why: a parallel loop over sentences splits badly (batch of one: one thread), and one over
 *     tokens is one flat loop with static chunks.
 *  2. Vectorize the innermost loop, whole, when it is the innermost dim of storage (no storage
 *     reorder or split), its extent is a constant and the definition has no reduction inside.
 *     Why: per-element work like (x - mean) * rstd is one vector statement (up to 64 elements)
 *     or an `omp simd` loop. Split into 16-wide pieces, a body with max() stayed scalar (clang
 *     unrolls the short loop, then finds vectorizing it "not beneficial": 0.34x a naive loop);
 *     around a reduction's loop nothing is vectorized (GEMM columns: 0.52x).
 *  3. A definition that is one reduction (an epilogue allowed) whose reads are contiguous along
 *     that constant innermost row (a GEMM's W(k, n), AttnV's V(b, j, h, d)): the reduction loop
 *     goes outside the row and the row is vectorized, the loop order of a hand-written ikj GEMM
 *     (the elements are accumulated in storage, the epilogue applied after the reduction; not
 *     for a float16 Func, whose storage rounds every store). A ragged row (vgemm's N(b) columns)
 *     that step 4 does not tile (no vector width: CompileOptions::vector_bits < 0) gets the same
 *     loop order without the vector annotation, which needs a constant extent: the C compiler
 *     vectorizes the contiguous row loop (6.3x faster than the reduction inside it).
 *  4. A contraction, on a CPU target with a vector width (DefaultScheduleTarget): step 3's shape, a
 *     float32 `sum` whose body reads a column operand (indices use k and the constant row n) and
 *     a row operand (k, not n), and a row width divisible by a vector: the grouped-GEMM recipe of
 *     the user guide (§4c) instead of step 3. The tile's rows t: the innermost other dim that the
 *     row operand's indices use and the column operand's do not (a token; AttnV's query inside its
 *     heads), and that no other extent uses. t split by 4, n by a column tile (4 vectors with
 *     512-bit registers, else 2; the largest of those that divides the width), k by 256 when its
 *     constant depth is larger; order [the other dims in domain order, n_o, k_o, t_o, k_i, t_i,
 *     n_i], t_i unrolled, n_i vectorized, a cache_write
 *     tile at t_o (16 or 8 vector accumulators), the column operand's panel copied at k_o (at n_o
 *     for one panel; none for a run-time depth: no constant box), n_o parallel when it has at
 *     least 4 iterations, else the outermost loop. Why: the ikj order of step 3 streams the output
 *     row through memory for every k (0.30x the hand tiles on a token GEMM); the tiled nest keeps
 *     it in registers and matched the hand-written recipe on the MoE benchmark (0.86-1.39x a
 *     per-expert OpenBLAS loop, from 0.29-0.60x). The ragged row leaves a guard per tile row, so
 *     the tile loop t_o is specialised (specialize_interior): whole tiles run a copy without it
 *     (MoE: 0.84-0.91x -> 1.08-1.36x the per-expert loop in two runs of bench/moe.sh).
 *     The column operand may also be read with n at another index than its innermost (nn.Linear's
 *     weight W[n, k]: Y = X W^T), the other reads contiguous along n, at a constant depth: its
 *     panel is then copied transposed (cache_read's tile order with n's dim innermost) and the
 *     tiles are the same. Why: that row is a strided read, which step 3 leaves as one dot
 *     product per element (27.5 ms); tiled over the transposed panel, 8.2 ms, 0.87x the same
 *     GEMM with W[k, n] (512 -> 512 over 1,352 tokens, 2 threads, AVX-512;
 *     bench/default_schedules.sh --ops=gemm,linear).
 *     A ragged row (vgemm's N(b) columns, QK^T's len(b) keys) gets the same tiles with 2 vectors
 *     per row (the last column tile of each row computes up to 2 vectors less one that nobody
 *     stores) and always a panel: at a run-time depth k is split by 64 so that the box is
 *     constant, the panel's zeros past the depth and the row adding nothing. The panel lets the
 *     tile's update run over the partial column tile without the column guard (LoopNest.cpp's
 *     update_guards_kept: the guard stays only where an uncached read needs it), so the vector
 *     loop is one multiply-add; n_o is not parallel (its extent varies), the outermost loop is.
 *     Why: untiled (step 3's order; QK^T's keys strided: a plain nest) vgemm took 5.7 ms and QK^T
 *     4.0 ms; tiled, 2.1 ms (the hand tiles: 3.7) and 1.8 ms (the best hand schedule: 1.5),
 *     2 threads, AVX-512, bench/default_schedules.sh --ops=vgemm,qkt.
 *  5. A block-sparse product (a BsrMatrix's row_times over one token loop left by step 1): the
 *     block-sparse recipe's register tiles (DefaultBlockSparseTiles.cpp), before steps 2-4.
 * Reductions inside a definition keep their accumulators in registers (lower_reductions splits a
 * long one into partial sums). Requires: the ops in order (scheduled_ops). Ensures:
 * It returns the schedule of each op it chose one for (Lower.cpp records them in the context's
 * default_schedules) and, for each tiled contraction, its untiled default (steps 1-3), which
 * Lower.cpp uses when the tiled nest raises a CompileError (a bound the prover cannot show);
 * plan_loops and the steps after it read schedules through ctx.schedule_of.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/default_schedule.cpp (the
 * tiled contractions at 128/256/512 bits, widths with a full, smaller or no tile, panels). */
#include <algorithm>
#include <optional>

#include "analysis/Simplify.h"
#include "cora/Tensor.h"
#include "ir/Epilogue.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

bool left_unscheduled(const TensorNode &f, const std::vector<TensorPtr> &ops) {
    const front::Schedule &s = front::schedule_of(f);
    if (!s.empty() || !s.op_splits.empty() || s.has_compute_at() || !s.hfuse.empty() || s.hfuse_member || s.inlined ||
        f.is_split_tail)
        return false;
    for (const TensorPtr &op : ops) // another op computed inside one of f's loops names them
        if (front::schedule_of(*op).at_consumer.lock().get() == &f) return false;
    return true;
}

bool uses_only(const Expr &e, const std::vector<const VarNode *> &allowed) {
    for (const VarNode *v : vars_of(e, VarRole::Index))
        if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) return false;
    return true;
}

bool indices_use(const Access &a, const VarNode *v) {
    for (const Expr &i : a.indices)
        if (uses_var(i, v)) return true;
    return false;
}

/** The tile's rows, the column operand (whose panel a tile reuses across its rows) and the outer
 * loops of a contraction whose constant row is `col`: the column operand is the first read whose
 * indices use k and col (W(k, n), W(e, k, n), AttnV's V(b, j, h, d)); the row operand the first
 * that uses k and not col; the rows, the innermost dim other than col that the row operand's
 * indices use and the column operand's do not (a token t, AttnV's query i inside its heads), and
 * that no other extent, nor the reduction's, uses (it moves inside every other dim). */
struct ContractionShape {
    TensorPtr column_operand;
    DimPtr rows;
    std::vector<DimPtr> outer;           ///< the other dims but col, in domain order
    const Access *column_read = nullptr; ///< the column operand's read (in the definition)
};
std::optional<ContractionShape> contraction_shape(const Layout &dom, const Reduce &red) {
    const VarNode *k = red.var.get(), *col = dom.back().dim->var.get();
    const Access *column = nullptr, *row = nullptr;
    visit_exprs(red.body, [&](const Expr &x) {
        const Access *a = x.as<Access>();
        if (!a || !indices_use(*a, k)) return;
        bool uses_col = indices_use(*a, col);
        if (uses_col && !column) column = a;
        if (!uses_col && !row) row = a;
    });
    if (!column || !row) return std::nullopt;
    for (size_t i = dom.size() - 1; i-- > 0;) {
        const VarNode *v = dom[i].dim->var.get();
        if (!indices_use(*row, v) || indices_use(*column, v) || uses_var(red.extent, v)) continue;
        ContractionShape shape{column->tensor, dom[i].dim, {}, column};
        for (size_t j = 0; j + 1 < dom.size(); j++) {
            if (j == i) continue;
            if (uses_var(dom[j].extent, v)) return std::nullopt;
            shape.outer.push_back(dom[j].dim);
        }
        return shape;
    }
    return std::nullopt;
}

} // namespace

bool has_reduction(const Expr &e) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) { found = found || x.as<Reduce>() != nullptr; });
    return found;
}

bool storage_keeps_innermost_dim(const TensorNode &f) {
    const TensorNode &t = store_target(f);
    for (const StorageTransform &st : t.storage_transforms)
        if (st.kind != StorageTransform::Kind::Fuse) return false;
    return true;
}

DimPtr default_reduction_loop(const Reduce &red) {
    // A Dim of its own over the reduction's variable: the user's Dim may be gone by now (a
    // definition holds the variable, whose pointer to its Dim does not keep it alive).
    return std::make_shared<const DimNode>(DimNode{red.var->name, new_symbol_id(), red.var});
}

int default_tile_vectors(int64_t width, int vector_bits) {
    // 4 vectors with 32 vector registers (AVX-512), else 2, and a tile that divides the row: one
    // that does not leaves a guard inside the vector loop (30x slower, user guide §4c).
    const int64_t lanes = vector_bits / 32;
    for (int v = vector_bits >= 512 ? 4 : 2; v >= 1; v /= 2)
        if (lanes > 0 && width % (v * lanes) == 0) return v;
    return 0;
}

namespace {

/** Columns of the default tile over a ragged row: each row's last column tile computes up to this
 * many columns less one that nobody stores. 16 on every vector width (one AVX-512 vector, two
 * AVX2 ones): measured by Pipeline::tune on a 2-core AVX-512 EPYC (bench/default_schedules.sh,
 * `tuned`), 4 rows x 1 vector against 4 x 2 (32 columns): vgemm (M, N, K in [16, 256]) 1.41 ms
 * against 2.05 ms, QK^T (lengths in [16, 256]) 1.53 ms against 1.87 ms, 2 threads. */
constexpr int64_t kRaggedRowColumns = 16;

int ragged_row_vectors(int vector_bits) {
    return int(std::max<int64_t>(1, kRaggedRowColumns / std::max(1, vector_bits / 32)));
}
/** The panel depth of a ragged row's column operand at a run-time depth (a constant box; the
 * depth past the run-time one is copied as zeros). */
constexpr int64_t kRaggedDepthPanel = 64;

/** The tile order that makes the column operand's panel contiguous along the row n, for a
 * contraction whose other reads are contiguous along n but whose column operand is read with n
 * at another position than the innermost (nn.Linear's weight W[n, k]: Y = X W^T): the operand's
 * dims with that position moved innermost. Empty when the reads do not have that shape. */
std::vector<size_t> transposed_panel_order(const Reduce &red, const ContractionShape &shape, const VarPtr &n) {
    const Access *column = shape.column_read;
    bool others_contiguous = true;
    visit_exprs(red.body, [&](const Expr &x) {
        const Access *a = x.as<Access>();
        if (a && a != column && a->tensor != column->tensor)
            others_contiguous = others_contiguous && reads_contiguously(x, n);
    });
    if (!others_contiguous) return {};
    std::optional<size_t> at;
    for (size_t i = 0; i < column->indices.size(); i++) {
        const int step = step_of(column->indices[i], n);
        if (step < 0) return {};
        if (step == 1) {
            if (at) return {};
            at = i;
        }
    }
    if (!at || *at + 1 == column->indices.size()) return {};
    std::vector<size_t> order;
    for (size_t i = 0; i < column->indices.size(); i++)
        if (i != *at) order.push_back(i);
    order.push_back(*at);
    return order;
}

/** Step 4: the register-tiled schedule of a contraction Y(..., t, ..., n) = sum_k A(..., t, k) B(..., k, n)
 * whose row n has a constant width (see the contract). Null when the shape does not fit it.
 * `contiguous`: every read is contiguous along n; else the column operand must be read with n
 * at another position (B(..., n, k)), and its panel is copied transposed. */
std::optional<front::Schedule> tiled_contraction(const TensorNode &f, const Layout &dom, const Reduce &red,
                                                 int64_t width, const DefaultScheduleTarget &target, bool contiguous) {
    using front::LoopTransform;
    if (target.target != Target::Host || red.op != ReduceOp::Sum || dom.size() < 2 || target.vector_bits < 128)
        return std::nullopt;
    const LayoutDim &col = dom.back();
    const int64_t lanes = target.vector_bits / 32;
    const bool ragged = width == 0; // a run-time row (vgemm's N(b), QK^T's len(b) keys)
    if (width % lanes != 0 || !f.type.is_float() || f.type.bits != 32) return std::nullopt;
    std::optional<ContractionShape> shape = contraction_shape(dom, red);
    if (!shape) return std::nullopt;
    std::vector<size_t> panel_order;
    if (!contiguous) {
        // The transposed panel needs a constant box to copy: a constant depth, or a ragged row's
        // panels of a run-time depth.
        panel_order = transposed_panel_order(red, *shape, col.dim->var);
        if (panel_order.empty() || (!ragged && !as_const_int(simplify(red.extent)))) return std::nullopt;
    }
    ContractionTile choice;
    if (target.tiles)
        if (auto chosen = target.tiles->find(f.name); chosen != target.tiles->end()) choice = chosen->second;
    auto reject = [&](auto &&...msg) {
        throw_compile_error("contraction_tiles['", f.name, "']: ", msg...,
                            " (CompileOptions::contraction_tiles, or a tuning table's entry)");
    };
    if (!choice.tiled) return std::nullopt;
    int64_t tile_cols = 0;
    if (choice.vectors == 0) {
        tile_cols =
            (ragged ? ragged_row_vectors(target.vector_bits) : default_tile_vectors(width, target.vector_bits)) * lanes;
    } else if (choice.vectors == 1 || choice.vectors == 2 || choice.vectors == 4 || choice.vectors == 8) {
        tile_cols = choice.vectors * lanes;
        if (!ragged && width % tile_cols != 0)
            reject(choice.vectors, " vectors of ", lanes, " floats (", tile_cols, " columns) do not divide its row of ",
                   width);
    } else {
        reject("vectors is ", choice.vectors, "; expected 0 (the default), 1, 2, 4 or 8");
    }
    if (choice.rows < 1 || choice.rows > 16) reject("rows is ", choice.rows, "; expected 1 to 16");
    if (choice.panel < 1 || choice.panel * tile_cols > kMaxTileElements)
        reject("panel is ", choice.panel, "; expected 1 to ", kMaxTileElements / tile_cols, " for a tile of ",
               tile_cols, " columns");
    const TensorPtr &panel_of = shape->column_operand;
    const Expr depth_expr = simplify(red.extent);
    const int64_t *depth = as_const_int(depth_expr);
    // A ragged row needs the column operand's panel (its tile's zeros let the update run over the
    // last, partial column tile without the column guard): at a run-time depth, a shallower one.
    const int64_t panel_depth =
        ragged && !depth && choice.panel == ContractionTile{}.panel ? kRaggedDepthPanel : choice.panel;

    front::Schedule s;
    DimPtr k = default_reduction_loop(red);
    s.reduction_loop = k;
    auto split = [&](const DimPtr &d, int64_t factor) {
        DimPtr outer = Dim(d->name + "_o").node(), inner = Dim(d->name + "_i").node();
        s.transforms.push_back(
            LoopTransform{LoopTransform::Kind::Split, d, outer, inner, nullptr, factor, nullptr, Expr()});
        return std::make_pair(outer, inner);
    };
    auto [row_o, row_i] = split(shape->rows, choice.rows);
    auto [col_o, col_i] = split(col.dim, tile_cols);
    s.order = shape->outer;
    s.order.push_back(col_o);
    DimPtr panel_at = depth ? col_o : nullptr; // a panel of non-constant depth has no constant box
    if ((depth && *depth > panel_depth) || (ragged && !depth)) {
        auto [k_o, k_i] = split(k, panel_depth);
        s.order.insert(s.order.end(), {k_o, row_o, k_i});
        panel_at = k_o;
    } else {
        s.order.insert(s.order.end(), {row_o, k});
    }
    s.order.insert(s.order.end(), {row_i, col_i});
    // The parallel loop: the column panels when there are enough to share, else the outermost.
    DimPtr parallel = !ragged && width / tile_cols >= 4 ? col_o : (shape->outer.empty() ? row_o : shape->outer[0]);
    s.annotations = {{parallel, ForKind::Parallel}, {row_i, ForKind::Unrolled}, {col_i, ForKind::Vectorized}};
    s.cache_write_at = row_o;
    s.interior_at = row_o;
    if (panel_at) s.cache_reads.push_back(front::Schedule::CacheRead{panel_of, panel_at, panel_order});
    return s;
}

/** Does t store the 2-D ragged domain `dom` ([b < B, j < len(b)]) packed as its two outer dims
 * (a ragged layout's default, or those dims fused with no padding), with the same extents, and
 * inner dims (X[b, j, f < 64]) whose extents do not depend on them? Then t's offset at
 * (b, j, ...) is a linear function of prefix(b) + j. */
bool stores_packed_like(const TensorNode &t, const Layout &dom) {
    if (t.storage.size() < 2 || t.storage_transforms.size() > 1) return false;
    for (const StorageTransform &st : t.storage_transforms) // the packing made explicit, unpadded
        if (st.kind != StorageTransform::Kind::Fuse || st.position != 0 || st.factor != 1) return false;
    const VarNode *outer = t.storage[0].dim->var.get(), *inner = t.storage[1].dim->var.get();
    for (size_t d = 2; d < t.storage.size(); d++)
        if (uses_var(t.storage[d].extent, outer) || uses_var(t.storage[d].extent, inner)) return false;
    const Expr row_extent = substitute(t.storage[1].extent, outer, var_expr(dom[0].dim->var));
    return equal(simplify(t.storage[0].extent), simplify(dom[0].extent)) &&
           equal(simplify(row_extent), simplify(dom[1].extent));
}

/** Would the fusion maps of f's fused 2-D ragged loop cancel out of `definition` (f's value with
 * inlined Funcs' reads substituted: an inlined T(b, j) = X(b, j) * S(b) reads S(b))? Only when f
 * and every read that uses the two dims store the domain packed and are indexed by exactly (b, j)
 * in their two outer dims (no other use of b or j): their offsets use prefix(fo(f)) + fi(f),
 * which folds to f. Any other use (a per-row read S(b), a dense
 * tensor D(b, j), a condition on j) reads a map entry per element, and the kernel checks both
 * maps, an entry per element, on every call: a loop over rows, parallel, then ran 3-28x faster
 * (2 threads, a 2-core Zen 5, a scratch program: 2 M elements in 2,048 rows, Y = D(b, j) * S(b) +
 * X(b, j) 5.2 ms fused against 0.19 ms over rows, Y = X(b, j) * S(b) + 1 2.5 against 0.12 ms;
 * 4,096 rows of 0-100: 0.40-0.43 against 0.05-0.13 ms and 0.21 against 0.03 ms). */
bool fusion_maps_cancel(const TensorNode &f, const Expr &definition, const Layout &dom) {
    if (dom.size() != 2 || !stores_packed_like(f, dom)) return false;
    const VarNode *row = dom[0].dim->var.get(), *col = dom[1].dim->var.get();
    int64_t uses = 0, covered = 0;
    visit_exprs(definition, [&](const Expr &x) {
        if (const VarNode *v = x.as<VarNode>()) {
            if (v == row || v == col) uses++;
            return;
        }
        const Access *a = x.as<Access>();
        if (a && a->indices.size() >= 2 && a->indices[0].as<VarNode>() == row && a->indices[1].as<VarNode>() == col &&
            stores_packed_like(*a->tensor, dom))
            covered += 2;
    });
    return uses == covered;
}

/** Which rule chose a default schedule (a tuner may choose tiles only for TiledContraction). */
enum class DefaultRule { Plain, TiledContraction, BlockSparseTiles };

/** `definition`: f's value with the reads of inlined Funcs substituted (what its nest computes). */
front::Schedule default_schedule(const TensorNode &f, const Expr &definition, const DefaultScheduleTarget &target,
                                 DefaultRule *rule = nullptr) {
    using front::LoopTransform;
    if (rule) *rule = DefaultRule::Plain;
    front::Schedule s;
    const Layout dom = front::loop_domain(f);
    if (dom.empty()) return s;
    DimPtr outer = dom[0].dim;
    std::vector<const VarNode *> fused_vars{dom[0].dim->var.get()};
    size_t next = 1;
    if (vars_of(dom[0].extent, VarRole::Index).empty()) {
        bool ragged_fused = false;
        for (; next < dom.size(); next++) {
            const Expr &e = dom[next].extent;
            bool innermost = next + 1 == dom.size();
            bool ragged = !vars_of(e, VarRole::Index).empty();
            // The innermost loop joins only a 2-D domain ([batch, len(batch)]: one map entry per
            // token), and only where the maps cancel (fusion_maps_cancel); deeper, a ragged
            // innermost fuse would need a map entry per element, read on every element wherever
            // the maps do not cancel (a transposed or padded store).
            if (!uses_only(e, fused_vars) || (innermost && (as_const_int(simplify(e)) || next > 1)) ||
                (ragged && ragged_fused) || (innermost && ragged && !fusion_maps_cancel(f, definition, dom)))
                break;
            ragged_fused = ragged_fused || ragged;
            DimPtr fused = Dim(outer->name + "_" + dom[next].dim->name).node();
            s.transforms.push_back(
                LoopTransform{LoopTransform::Kind::Fuse, nullptr, outer, dom[next].dim, fused, 1, nullptr, Expr()});
            fused_vars.push_back(dom[next].dim->var.get());
            outer = fused;
        }
    }
    if (next + 1 == dom.size() && storage_keeps_innermost_dim(f))
        if (std::optional<front::Schedule> tiles = block_sparse_tiles(f, s, outer, target)) {
            if (rule) *rule = DefaultRule::BlockSparseTiles;
            return *tiles;
        }
    const LayoutDim &inner = dom.back();
    const Expr extent = simplify(inner.extent); // alive while `e` points into it
    const int64_t *e = as_const_int(extent);
    if (next < dom.size() && !e && storage_keeps_innermost_dim(f)) {
        // A ragged row (vgemm's N(b) columns): step 4's tiles over panels of the column operand,
        // else step 3's loop order without the vector annotation (a ragged extent has no whole
        // vectors); the C compiler vectorizes the contiguous row.
        const Reduce *red = scheduled_reduce(f.value);
        if (red && !f.type.is_storage_only() && red->var->dim && !uses_var(red->extent, inner.dim->var.get()))
            if (std::optional<front::Schedule> tiled =
                    tiled_contraction(f, dom, *red, 0, target, reads_contiguously(red->body, inner.dim->var))) {
                if (rule) *rule = DefaultRule::TiledContraction;
                return *tiled;
            }
        if (red && !f.type.is_storage_only() && red->var->dim && !uses_var(red->extent, inner.dim->var.get()) &&
            reads_contiguously(red->body, inner.dim->var)) {
            DimPtr k = default_reduction_loop(*red);
            s.reduction_loop = k;
            s.order = {k, inner.dim};
        }
        return s;
    }
    if (!(next < dom.size() && e && *e >= 2 && storage_keeps_innermost_dim(f))) return s;
    if (!has_reduction(f.value)) {
        s.annotations.emplace_back(inner.dim, ForKind::Vectorized);
        return s;
    }
    // One reduction (an epilogue around it allowed) whose reads are contiguous along the row:
    // its loop goes outside the row, which is then vectorized (each k adds one contiguous row of
    // W to the output row). Any other reduction is left inside an unvectorized row: the C compiler
    // does not vectorize around the reduction's loop. Not for float16 storage, which must not
    // hold partial sums (each store rounds).
    const Reduce *red = scheduled_reduce(f.value);
    if (red && !f.type.is_storage_only() && red->var->dim && !uses_var(red->extent, inner.dim->var.get())) {
        const bool contiguous = reads_contiguously(red->body, inner.dim->var);
        if (std::optional<front::Schedule> tiled = tiled_contraction(f, dom, *red, *e, target, contiguous)) {
            if (rule) *rule = DefaultRule::TiledContraction;
            return *tiled;
        }
        if (!contiguous) return s;
        DimPtr k = default_reduction_loop(*red);
        s.reduction_loop = k;
        s.order = {k, inner.dim};
        s.annotations.emplace_back(inner.dim, ForKind::Vectorized);
    }
    return s;
}

} // namespace

DefaultSchedules choose_default_schedules(const std::vector<TensorPtr> &ops, const DefaultScheduleTarget &target,
                                          const std::function<Expr(const Expr &)> &inline_reads_of) {
    DefaultSchedules chosen;
    DefaultScheduleTarget untiled = target;
    untiled.vector_bits = 0;
    for (const TensorPtr &op : ops) {
        if (!left_unscheduled(*op, ops)) continue;
        DefaultRule rule = DefaultRule::Plain;
        const Expr definition = inline_reads_of ? inline_reads_of(op->value) : op->value;
        front::Schedule s = default_schedule(*op, definition, target, &rule);
        // A contraction the tile rules apply to, whichever choice it got (an explicit untiled
        // one included): what a tuner may choose for.
        DefaultScheduleTarget rules = target;
        rules.tiles = nullptr;
        DefaultRule by_rules = rule;
        if (rule == DefaultRule::Plain) (void)default_schedule(*op, definition, rules, &by_rules);
        if (by_rules == DefaultRule::TiledContraction) {
            std::string definition;
            for (const LayoutDim &d : op->domain)
                definition += "[" + d.dim->name + " < " + print(d.extent) + "]";
            const Expr width_expr = simplify(op->domain.back().extent);
            const Reduce *red = scheduled_reduce(op->value);
            const Expr depth = red ? simplify(red->extent) : Expr();
            const int64_t *constant_width = as_const_int(width_expr);
            const int64_t width = constant_width ? *constant_width : 0;
            chosen.tunable.push_back(TunableContraction{op->name, definition + " = " + print(op->value), width,
                                                        red && (as_const_int(depth) != nullptr || !constant_width),
                                                        constant_width ? default_tile_vectors(width, target.vector_bits)
                                                                       : ragged_row_vectors(target.vector_bits)});
        }
        if (s.cache_write_at) chosen.untiled[op.get()] = default_schedule(*op, definition, untiled);
        chosen.schedules[op.get()] = std::move(s);
    }
    // A tile named for a Func the rules do not tile would otherwise be ignored without a word.
    if (target.tiles)
        for (const auto &entry : *target.tiles) {
            const std::string &name = entry.first; // (clang 14: no lambda capture of bindings)
            if (std::none_of(chosen.tunable.begin(), chosen.tunable.end(),
                             [&](const TunableContraction &t) { return t.func == name; }))
                throw_compile_error("contraction_tiles['", name, "']: no Func of the pipeline by that name is a ",
                                    "contraction left unscheduled that the default tiles apply to (a float32 sum of a ",
                                    "row operand times a column operand read along a constant row whose width is a ",
                                    "multiple of the ", target.vector_bits, "-bit vectors, on a CPU target)");
        }
    return chosen;
}

} // namespace cora::ir
