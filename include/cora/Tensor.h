/** \file Tensors and compute definitions over named dims.
 *
 *     Dim batch("batch"), seq("seq");
 *     Param B("B", 1, 1024);
 *     LengthArray len("len", B, 0, 512);
 *     Tensor A("A", {{batch, B}, {seq, len(batch)}});           // ragged input
 *     Func Out("Out", {{batch, B}, {seq, len(batch)}});
 *     Out.compute([&](Expr b, Expr s) { return 2 * A(b, s); });
 *
 * A shape lists dims outermost first; an extent may use the dims before it (a vdim), several of
 * them, params and length arrays. Storage is packed in that order with no padding. */
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cora/Expr.h"

namespace cora {

namespace ir {
struct TensorNode;
}

/** One dimension of a shape: a named dim and its extent. */
class ActiveTiles; // cora/Spatial.h

struct DimExtent {
    Dim dim;
    Expr extent;
    DimExtent(Dim d, Expr e) : dim(std::move(d)), extent(std::move(e)) {}
};
using Shape = std::vector<DimExtent>;

/** An input tensor (placeholder) with a ragged or dense shape. */
class Tensor {
public:
    Tensor(const std::string &name, const Shape &shape, Type type = Float32);

    const std::string &name() const;
    Type type() const;
    size_t dimensions() const;
    /** The storage layout, outermost dim first. */
    Shape shape() const;

    /** Read the element at the given indices (one per dim, in order). */
    template <typename... Args> Expr operator()(const Args &...indices) const { return access({Expr(indices)...}); }
    Expr access(const std::vector<Expr> &indices) const;

    /** Declare an integer input an index tensor: every element is in [min_value, max_value]
     * (e.g. BSR column indices in [0, column blocks - 1], a gather list of rows). Its reads may
     * then appear in other tensors' indices (cast to Int64): the prover bounds them by the range,
     * and every kernel reading it checks each element on every call (RuntimeError naming the
     * packed position and the value; nothing written). CompileError for a Func, a float tensor
     * or min_value > max_value. */
    Tensor &index_range(int64_t min_value, int64_t max_value);
    /** Declare an index tensor's elements known when compiling (a static sparsity pattern's
     * column indices), in packed storage order, i.e. the order of the buffer a kernel reads: a
     * read whose offset is constant (in a dismantled loop, Func::dismantle) folds to the value,
     * so the kernel loads no index. Kernels still take the tensor at run time and check that it
     * holds exactly these values (RuntimeError naming the position). CompileError unless
     * index_range() was declared first and every value lies in it. */
    Tensor &index_values(const std::vector<int32_t> &values);
    /** The values given to index_values(), or null. */
    const std::vector<int64_t> *static_values() const;

    // --- Storage transforms (memory layout only; values and indices never change). ---

    /** Pad the storage extent of `d` up to a multiple of `multiple` (a ragged row of length n
     * then takes ceil_mult(n, multiple) elements). Loops padded by pad_loop may write there. */
    Tensor &pad_storage(const Dim &d, int64_t multiple);
    /** Store the dims `outer` and `inner` (adjacent, inner's extent depending only on outer,
     * e.g. [batch, seq(b)]) as one packed dim `fused` (e.g. tokens), whose total is padded up to
     * a multiple of `bulk_pad`: the pad rows at the end receive the extra iterations of a
     * bulk-padded fused loop. Buffers are sized by the library as usual. */
    Tensor &fuse_storage(const Dim &outer, const Dim &inner, const Dim &fused, int64_t bulk_pad = 1);
    /** Store dim `d` (extent E) as two dims, `outer` (extent ceil(E / factor)) and `inner`
     * (extent `factor`): element d lives at (d / factor, d % factor), so each row of `d` takes
     * ceil_mult(E, factor) elements and a later reorder_storage can interleave the blocks
     * (e.g. tiles of 16 features stored contiguously). */
    Tensor &split_storage(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor);
    /** Store the given dims in this order: they take the positions they occupy, outermost
     * first (dims of the current storage: after earlier split/fuse_storage calls). A dim whose
     * extent uses another dim must stay inside it (e.g. seq with extent len(batch)). */
    Tensor &reorder_storage(const std::vector<Dim> &outermost_first);

    const std::shared_ptr<ir::TensorNode> &node() const { return node_; }
    bool same_as(const Tensor &o) const { return node_ == o.node_; }

protected:
    Tensor() = default;
    std::shared_ptr<ir::TensorNode> node_;
};

/** The most copies of a body that the dismantled loops of one nest may expand to (Func::dismantle):
 * beyond it the generated code grows past what the C compiler handles in seconds. */
inline constexpr int64_t kMaxDismantledCopies = 2048;

/** A computed tensor: a loop domain (its shape) and a definition in terms of the domain dims. */
class Func : public Tensor {
public:
    Func(const std::string &name, const Shape &domain, Type type = Float32);

    /** Define the value of every element; `value` uses the domain dims as variables. The call's
     * source location (file, line: filled in by the compiler) is quoted by errors about the definition. */
    Func &compute(const Expr &value, const char *file = __builtin_FILE(), int line = __builtin_LINE());

    /** Define the value with a lambda taking one Expr per domain dim (outermost first), or none. */
    template <typename F, typename = std::enable_if_t<!std::is_convertible_v<F, Expr>>>
    Func &compute(F &&f, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
        return compute(invoke_over_dims(std::forward<F>(f)), file, line);
    }

    /** Store in a layout other than the loop domain: the same dims in the same order, each
     * extent at least the loop extent (checked at compile time). */
    Func &store_in(const Shape &storage);

    bool defined() const;
    Shape domain() const;

    // --- Scheduling (loops only; the values computed never change). Errors: CompileError. ---

    /** Split the loop over `d` into `outer` (extent ceil(E / factor)) and `inner` (extent
     * factor), d = outer * factor + inner. When E is ragged or not a multiple of the factor, the
     * body is guarded by d < E; the guard is removed when the prover shows it always holds. */
    Func &split(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor);
    /** Fuse the loop `inner`, directly inside `outer`, with it into one loop `fused` over all
     * (outer, inner) pairs in order. A ragged inner extent (e.g. seq(b) inside batch) gives a
     * loop over the total (e.g. all tokens); the prelude builds the maps fused -> (outer, inner). */
    Func &fuse(const Dim &outer, const Dim &inner, const Dim &fused);
    /** Round the extent of loop `d` up to a multiple of `multiple`. The extra iterations compute
     * values nobody reads; they run unguarded when the prover shows that every access stays in
     * storage (pad the storage of what they touch, e.g. pad_storage / fuse_storage with a bulk
     * pad), and guarded otherwise. On a fused ragged loop this is bulk padding: the total is
     * padded, with no dummy items added by the user. Storage of this Func padded less than the
     * loop is a CompileError. */
    Func &pad_loop(const Dim &d, int64_t multiple);
    /** Run loop `d` in a permuted order: a loop `rank` over the same extent, with
     * d = permutation[rank]. The extent must be loop-invariant. The kernel checks on every
     * call that the array is a permutation of [0, extent) (a RuntimeError otherwise). */
    Func &remap(const Dim &d, const Dim &rank, const LengthArray &permutation);
    /** Load balancing: run loop `d` in decreasing order of `cost` (an integer expression of d,
     * e.g. the row length), ties by index, so the longest iterations start first. The
     * RaggedShape builds the order once per shape; the kernel checks it like remap(). */
    Func &remap_longest_first(const Dim &d, const Dim &rank, const Expr &cost);
    /** Spatial sparsity (cora/Spatial.h): compute only the active tiles of `tiles`. The loops
     * `n`, `y`, `x` (this Func's batch and position dims, whose extents must be the list's grid:
     * a CompileError otherwise) become, in place, `tile` (over the active tiles, in the list's
     * order) and `yi`, `xi` (a position within the tile, extents tile_h and tile_w):
     * y = ty * tile_h + yi, guarded by y < rows where the last tile is partial. The loop over
     * `tile` is parallel by default. Positions outside the active tiles are not written: they
     * keep what the output held (incremental inference on a cached output), unless
     * fill_inactive_tiles() gives them a value. */
    Func &over_active_tiles(const ActiveTiles &tiles, const Dim &n, const Dim &y, const Dim &x, const Dim &tile,
                            const Dim &yi, const Dim &xi);
    /** After over_active_tiles(): the positions of the inactive tiles get `value` (an expression
     * of this Func's dims, e.g. 0.0f). Returns the op that writes them (named "<name>_inactive",
     * with loops named as this Func's tile loops), to be scheduled on its own (vectorize the
     * channels); like an op split's tail, it writes this Func's storage and is not a tensor of
     * its own. */
    Func fill_inactive_tiles(const Expr &value);
    /** Horizontal fusion: run the outermost loop of this Func and of each of `others` as one
     * loop (one parallel region / launch): the first E_0 iterations run this Func's body, the
     * next E_1 the first other's, and so on. The Funcs must not read each other, and no Func
     * computed between them may read them (CompileError otherwise). */
    Func &hfuse(const std::vector<Func> &others);
    /** Operation splitting: from now on this Func's loops cover [0, point) of its domain dim
     * `d`, and the returned Func, its tail (named "<name>_tail"), covers [point, E) with the
     * same definition; each is scheduled on its own, e.g. the head in check-free tiles with
     * point = floor_mult(len(b), 16) and the tail with a guard, and hfuse runs both in one
     * loop. In the tail, `d` counts from the point: its loop runs over [0, E - point).
     * `point` may use the dims outside `d`, params and length arrays; 0 <= point <= E must be
     * provable (a CompileError otherwise; clamp it with min()). A loop of either part that
     * covers `d` cannot be padded (its extra iterations would write the other part). The tail
     * writes this Func's storage: it is not a tensor of its own, so it cannot be read, be an
     * output or change storage. A Func (or tail) can be split again, on any dim, within the
     * range its earlier splits left (e.g. rows at floor_mult(M, 4), then columns at
     * floor_mult(N, 32): a head of full tiles in both, and tails "<name>_tail", "<name>_tail2"). */
    Func split_op(const Dim &d, const Expr &point);
    /** Compute this Func where it is read: every read becomes its definition at the read's
     * indices, so it is never stored (no intermediate buffer, no loop nest of its own). A
     * Func read many times is recomputed each time. It cannot be an output or have a loop
     * schedule, op split, horizontal fusion or storage change (CompileError). */
    Func &compute_inline();
    /** Keep this Func stored: computed whole, in its own loop nest, before its readers. That is
     * what every Func gets, except two kinds left unscheduled: an elementwise Func read at one
     * place (its reader's own indices, outside any reduction), which lowering inlines by default,
     * and a per-row Func of a row-wise op over a ragged row (a softmax row's max and sum), which
     * the default computes at that op's row loop; compute_root keeps such a Func stored and in its own nest
     * (to time it, or to read it back while debugging). */
    Func &compute_root();
    /** Compute this Func inside `consumer`'s loop over `d`: for each value of the consumer's
     * loops down to `d`, this Func's elements at those indices are computed right before the
     * consumer uses them (better locality; e.g. a softmax row's max and sum next to the row).
     * The consumer's loops down to `d` must be this Func's outermost domain dims, in order,
     * with equal extents, unsplit in both schedules; the consumer may read this Func only at
     * its current indices of those dims, and no op computed in between may read it
     * (CompileError otherwise). Storage is unchanged (the whole Func is stored). */
    Func &compute_at(const Func &consumer, const Dim &d);
    /** Cache the elements this Func computes inside loop `at` in a dense tile local to each
     * iteration of `at` (on the stack, so the C compiler can keep it in registers): the tile
     * is initialised, the loops inside `at` update it, and it is written to storage once, under
     * the same guards. With the reduction dim scheduled inside `at` (e.g. split rows and
     * columns into 4 x 16 tiles and reorder the reduction dim outside the tile's loops), this
     * is a register-blocked micro-kernel. The loops inside `at` over the Func's dims must have
     * constant extents (at most 16384 elements in all; CompileError otherwise). Reduction
     * loops may also run outside `at` (k-panels: split k and put the panel loop outside the
     * tile's loop): the elements are then initialised in storage before the outermost
     * reduction loop, and each visit of the tile loads them, accumulates and stores them back.
     *
     * A definition that is one reduction (sum/maximum/minimum over k), possibly inside
     * elementwise work on its result — an epilogue such as `sum(...) + bias(o)`,
     * `max(sum(...) * s, 0.0f)` or a residual — can name k in split, reorder and unroll: k then
     * becomes a loop of the nest (innermost until reordered), the elements are initialised
     * before the outermost reduction loop and updated inside it, and the epilogue is applied once
     * per element when the reduction is complete (at the tile's write-back, or in a pass right
     * after the reduction loops). A definition with two reductions side by side schedules none.
     * Reduction loops cannot be padded, fused, remapped, vectorized or run in parallel. */
    Func &cache_write(const Dim &at);
    /** Copy the region of `t` that this Func reads inside loop `at` into a dense tile at the
     * start of each iteration of `at`, and read the tile instead (packing, e.g. a K x 16 panel
     * of B for a GEMM tile). The region is inferred from the reads: all reads of `t` must use
     * the same indices, and the region's size must be a constant (loops inside `at` with
     * constant extents); elements outside `t`'s shape are filled with zeros and never used.
     * CompileError otherwise. */
    Func &cache_read(const Tensor &t, const Dim &at);
    /** cache_read with the tile's dims in another order: `tile_order` lists every dim of `t`'s
     * domain once, outermost first (e.g. a block of a row-major weight stored column by column,
     * so that a vector of its rows is one contiguous load). The copy writes the tile in that
     * order; the reads and the zeros outside `t`'s shape are as for cache_read. CompileError when
     * `tile_order` is not a permutation of `t`'s dims. */
    Func &cache_read(const Tensor &t, const Dim &at, const std::vector<Dim> &tile_order);
    Func &pad_storage(const Dim &d, int64_t multiple);
    Func &fuse_storage(const Dim &outer, const Dim &inner, const Dim &fused, int64_t bulk_pad = 1);
    Func &split_storage(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor);
    Func &reorder_storage(const std::vector<Dim> &outermost_first);
    /** Reorder loops: the given loops take the positions they occupy, outermost first. A loop
     * whose extent depends on another loop cannot be moved outside it. */
    Func &reorder(const std::vector<Dim> &outermost_first);
    /** Run the loop in parallel (OpenMP; the outermost parallel loop of a nest is used). */
    Func &parallel(const Dim &d);
    /** Vectorize the loop (its extent must be a constant). */
    Func &vectorize(const Dim &d);
    /** Unroll the loop (its extent must be a constant). */
    Func &unroll(const Dim &d);
    /** Expand the loop when compiling (SparTA's `dismantle`): one copy of its body per iteration,
     * the index a constant in each, so reads of values known when compiling (LengthArray::constant,
     * Tensor::index_values: a static sparsity pattern) fold to constants and the loops inside get
     * constant extents. The loop's extent must be known once the dismantled loops outside it are
     * expanded (e.g. the present blocks of block row `nb` after dismantling `nb`); absent blocks
     * leave no code. A nest expands to at most kMaxDismantledCopies copies of the innermost
     * dismantled body (CompileError beyond: the code would grow with the pattern). */
    Func &dismantle(const Dim &d);
    /** Run loop `d`'s body twice: a copy without the border checks for the iterations of `d`
     * whose whole body stays inside the tensors, and the body as written for the others (Halide's
     * loop partitioning, chosen by hand). The checks removed are the integer comparisons of a
     * select's condition (zero padding: `select(inside, in(clamped), 0)`) and the clamps of a read's
     * index that provably always hold (or never apply) for every iteration inside `d`, given `d`'s
     * index and what is outside it; the copy runs when they do. Results are unchanged; code size
     * doubles. For a convolution over tiles, name the tile loop (interior tiles then read the
     * input with no select and no clamp), or the loop of the innermost sum (its taps are checked
     * one by one, so tiles on the edge run their inside taps clean too:
     * apps/spatial/conv_layer.h). CompileError when `d` is not a loop of this Func or is named
     * twice. */
    Func &specialize_interior(const Dim &d);
    /** GPU (CompileOptions::target Cuda or CudaEmulated): bind loops to the axes of the grid's
     * blocks, `x` to blockIdx.x, `y` to blockIdx.y, `z` to blockIdx.z; each block runs the loops'
     * body for one index. A nest's block loops are its outermost loops and make one kernel launch
     * (ops hfused with it share the launch). A ragged or fused loop is bound as it is; an axis
     * whose extent differs per block of an outer axis (a matrix's tiles inside a loop over the
     * matrices) is launched at its largest extent, and the blocks past their own extent do
     * nothing. Reduction loops cannot be bound. */
    Func &gpu_blocks(const Dim &x);
    Func &gpu_blocks(const Dim &x, const Dim &y);
    Func &gpu_blocks(const Dim &x, const Dim &y, const Dim &z);
    /** GPU: bind loops inside the block loops to the axes of a block's threads (threadIdx.x, .y,
     * .z). The launch uses the largest extent over all blocks (at most 1024 threads in all); a
     * thread whose index is past its block's extent does nothing. Nothing may be stored to memory
     * outside the thread loops of a kernel that has them (each thread would redo it). */
    Func &gpu_threads(const Dim &x);
    Func &gpu_threads(const Dim &x, const Dim &y);
    Func &gpu_threads(const Dim &x, const Dim &y, const Dim &z);
    /** GPU: run the reduction loop `k` (extent 16) on tensor cores, one
     * mma.sync.m16n8k16 (float16 operands, float32 accumulators) per warp and step of the loops
     * outside it. The schedule must make each warp's 32 threads one 16 x 8 output tile laid out
     * as the instruction's fragments: a 4 x 8 thread block, gpu_threads(t, g) with t over 4 and
     * g over 8 (z free: one warp per index), and in each thread a 2 x 2 register nest inside `k`,
     * row g + 8 * ih and column 2 * t + jl of the tile (split i into ih(2), g(8) and j into
     * t(4), jl(2)). The operands are float16 (best: cache_read tiles in shared memory), the sum
     * a float32 cache_write tile, nothing around the nest depends on the thread, and every
     * thread axis is bound exactly (padded sizes). Elsewhere (CudaEmulated, the CUDA source on
     * CPU threads) the same nest runs as loops or as an emulated warp instruction, so the
     * schedule is checked on any machine. docs/gpu.md, "Tensor cores". */
    Func &gpu_mma(const Dim &k);

private:
    explicit Func(std::shared_ptr<ir::TensorNode> node) { node_ = std::move(node); }
    std::vector<Expr> dim_vars() const;
    [[noreturn]] void arity_error(size_t got) const;

    template <typename F> Expr invoke_over_dims(F &&f) {
        std::vector<Expr> v = dim_vars();
        if constexpr (std::is_invocable_r_v<Expr, F>) {
            return f();
        } else if constexpr (std::is_invocable_r_v<Expr, F, Expr>) {
            if (v.size() != 1) arity_error(1);
            return f(v[0]);
        } else if constexpr (std::is_invocable_r_v<Expr, F, Expr, Expr>) {
            if (v.size() != 2) arity_error(2);
            return f(v[0], v[1]);
        } else if constexpr (std::is_invocable_r_v<Expr, F, Expr, Expr, Expr>) {
            if (v.size() != 3) arity_error(3);
            return f(v[0], v[1], v[2]);
        } else if constexpr (std::is_invocable_r_v<Expr, F, Expr, Expr, Expr, Expr>) {
            if (v.size() != 4) arity_error(4);
            return f(v[0], v[1], v[2], v[3]);
        } else if constexpr (std::is_invocable_r_v<Expr, F, Expr, Expr, Expr, Expr, Expr>) {
            if (v.size() != 5) arity_error(5);
            return f(v[0], v[1], v[2], v[3], v[4]);
        } else {
            static_assert(std::is_invocable_r_v<Expr, F, Expr, Expr, Expr, Expr, Expr, Expr>,
                          "compute(): the lambda must take 0 to 6 Expr arguments and return an Expr");
            if (v.size() != 6) arity_error(6);
            return f(v[0], v[1], v[2], v[3], v[4], v[5]);
        }
    }
};

} // namespace cora
