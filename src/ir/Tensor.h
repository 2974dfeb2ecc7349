/** \file Tensors, layouts and the prelude's aux-array specs, as IR symbols.
 *
 * A layout is an ordered list of named dims, each with an extent expression that may use the
 * index variables of the dims before it (a vdim) or none (a cdim). The same layout type serves
 * as a Func's loop domain and as a tensor's storage layout. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace cora::ir {

struct LayoutDim {
    std::shared_ptr<const DimNode> dim;
    Expr extent;
};
using Layout = std::vector<LayoutDim>;

enum class LoopAnnotation : uint8_t { Serial, Parallel, Vectorize, Unroll };

/** One step of a loop schedule, applied in the order given.
 *  - Split: loop `parent` becomes `outer` (extent ceil(E / factor)) and `inner` (extent factor),
 *    parent = outer * factor + inner.
 *  - Fuse: adjacent loops `outer`, `inner` become one loop `fused` over every (outer, inner)
 *    pair; a ragged inner extent uses the prelude's fusion maps fo(fused), fi(fused).
 *  - Pad: the extent E of loop `parent` becomes ceil_mult(E, factor); the extra iterations
 *    compute values nobody reads, so they must stay inside storage (else they are guarded). */
struct LoopTransform {
    enum class Kind : uint8_t { Split, Fuse, Pad, Remap };
    Kind kind;
    std::shared_ptr<const DimNode> parent, outer, inner, fused;
    int64_t factor = 1;
    /** Remap: loop `parent` becomes loop `outer` (its rank) with parent = perm(rank), where perm
     * is `permutation` (a user LengthArray) or, when that is null, the prelude's ordering of
     * the parent's indices by decreasing `cost` (longest first; ties by index). */
    std::shared_ptr<const UFNode> permutation;
    Expr cost;
};

struct TensorNode;

/** Operation splitting: the op's loops cover only [0, point) of its domain dim `dim`; `tail`, a
 * Func node that writes the same storage, covers [point, E) (its dim runs from 0, shifted). */
struct OpSplit {
    std::shared_ptr<const DimNode> dim;
    Expr point; ///< in terms of the dims outside `dim`, params and length arrays
    std::shared_ptr<const TensorNode> tail;
};

/** How a Func's loop nest is built from its domain, recorded as data and applied by
 * lower/ScheduleLoops. Empty: the default schedule (domain order, outermost loop parallel). */
struct Schedule {
    std::vector<LoopTransform> transforms;             ///< applied in order
    std::vector<std::shared_ptr<const DimNode>> order; ///< reorder requests, outermost first
    std::vector<std::pair<std::shared_ptr<const DimNode>, LoopAnnotation>> annotations;
    /** Horizontal fusion: this Func's outermost loop and those of `hfuse` run as one loop. Weak:
     * a member may read the leader's inputs or be read by it; see hfuse_members(). */
    std::vector<std::weak_ptr<const TensorNode>> hfuse;
    bool hfuse_member = false; ///< listed in another Func's hfuse group
    /** Operation splits, in order: each cuts the op's loops at its point (in the range the
     * earlier ones left) and hands the rest to its tail. Empty: the op is not split. */
    std::vector<OpSplit> op_splits;
    bool inlined = false; ///< compute_inline: expanded into its readers, never stored
    /** compute_at: this Func's loops run inside `at_consumer`'s loop over `at_loop` (set
     * together). Weak: the consumer reads this Func, so it owns it; a strong pointer back would be
     * a cycle that is never freed. */
    std::weak_ptr<const TensorNode> at_consumer;
    std::shared_ptr<const DimNode> at_loop;
    bool has_compute_at() const { return at_loop != nullptr; }
    /** The dim of a definition that is one reduction (sum/maximum/minimum over it), once a
     * primitive names it: it is then a loop of the nest (innermost, until split or reordered),
     * the elements are initialised before the first reduction loop and updated inside it. */
    std::shared_ptr<const DimNode> reduction_loop;
    /** cache_write: the elements computed inside this loop live in a per-iteration dense tile
     * (initialised, updated, then written to storage once). */
    std::shared_ptr<const DimNode> cache_write_at;
    /** cache_read: the region of `tensor` read inside loop `at` is copied into a dense tile at
     * the start of each iteration of `at`, and read from there. */
    struct CacheRead {
        std::shared_ptr<const TensorNode> tensor;
        std::shared_ptr<const DimNode> at;
    };
    std::vector<CacheRead> cache_reads;
    bool empty() const {
        return transforms.empty() && order.empty() && annotations.empty() && !reduction_loop && !cache_write_at &&
               cache_reads.empty();
    }
};

/** One step from a tensor's logical storage layout to its physical layout; steps apply in
 * order, each to the layout the previous ones produced (positions refer to that layout).
 *  - Fuse: dims `position` and `position + 1` (an outer dim and an inner dim whose extent
 *    depends only on it) become one packed dim `a`, index P(outer) + inner where P is the
 *    prefix sum of the inner extent, total padded up to a multiple of `factor`.
 *  - Split: dim `position` (extent E) becomes `a` (extent ceil(E / factor)) and `b` (extent
 *    `factor`), index d / factor and d % factor; inner extents that used d use a * factor + b.
 *  - Reorder: the dims take the order `order` (old positions, outermost first); every extent
 *    uses only dims before it. */
struct StorageTransform {
    enum class Kind : uint8_t { Fuse, Split, Reorder };
    Kind kind;
    size_t position = 0;
    std::shared_ptr<const DimNode> a, b;
    int64_t factor = 1;
    std::vector<size_t> order;
};

struct TensorNode {
    std::string name;
    uint64_t id;
    Type type;
    bool is_input;
    Layout domain;  ///< loop domain (Funcs) or logical shape (inputs): what may be read
    Layout storage; ///< storage layout; dims in the same order as domain, extents >= domain's
    std::vector<StorageTransform> storage_transforms; ///< storage -> physical layout, in order
    Expr value;                                       ///< definition (Funcs), in terms of domain dim variables
    Schedule schedule;
    /** The tail of an op split writes the storage of `stores_into`, the Func it was split from,
     * at `store_indices` (its own domain vars shifted by the split point). Weak: the Func owns
     * its tails (Schedule::op_splits); see split_head(). */
    bool is_split_tail = false;
    std::weak_ptr<const TensorNode> stores_into;
    std::vector<Expr> store_indices;
};
using TensorPtr = std::shared_ptr<const TensorNode>;

/** For an op-split tail, the Func whose storage it writes; null for every other tensor.
 * CompileError when that Func no longer exists (only its tail was kept). */
TensorPtr split_head(const TensorNode &t);
/** The members of `t`'s horizontal fusion group, without `t` (CompileError when one no longer
 * exists). */
std::vector<TensorPtr> hfuse_members(const TensorNode &t);
/** The tensor whose storage an op's loops write: itself, or for an op-split tail its Func. */
inline const TensorNode &store_target(const TensorNode &t) { return t.is_split_tail ? *split_head(t) : t; }
/** The indices of store_target(t) that the op writes, in terms of t's domain vars. */
std::vector<Expr> store_indices(const TensorNode &t);
/** The ranges the op's loops run over: the domain, with an op-split dim cut at its point. */
Layout loop_domain(const TensorNode &t);

/** An aux array built by the prelude.
 *  - PrefixSum: for every index of the layout's outer dims (all but the last),
 *    A[outer..., x] = sum over x' < x of `summand`(outer..., x'), for x in [0, extent of the
 *    last dim]; i.e. the last dim of `layout` has extent E+1 where E is the summed range.
 *    `summand` uses the index variables of `layout`'s dims.
 *  - FusedOuter / FusedInner (fo, fi): one entry per iteration f of a fused loop over
 *    (o < outer_extent, i < E_i(o)), whose total P(outer_extent) (P = `prefix`, 1-D) is padded
 *    up to a multiple of `pad`: fo[f] = o and fi[f] = i, so P[fo[f]] + fi[f] = f. The pad
 *    segment belongs to the last o: fo = outer_extent - 1, fi = f - P[outer_extent - 1].
 *  - LongestFirst: layout [d: E]; entry p is the index of d with the p-th largest `summand`
 *    (the cost, in terms of d's variable), ties by index: a permutation of [0, E). */
struct AuxSpec {
    enum class Kind : uint8_t { PrefixSum, FusedOuter, FusedInner, LongestFirst };
    Kind kind = Kind::PrefixSum;
    Layout layout;
    Expr summand;
    std::shared_ptr<const UFNode> prefix;  ///< fusion maps: the prefix sum P they invert
    std::shared_ptr<const UFNode> partner; ///< FusedInner: its fo (checked together)
    Expr outer_extent;                     ///< fusion maps; LongestFirst: the permuted extent
    int64_t pad = 1;                       ///< fusion maps
    std::string key;                       ///< structural identity: equal keys build equal arrays
};

/** A printable identity of an expression that distinguishes dims/UFs/vars by id. */
std::string structural_key(const Expr &e);

} // namespace cora::ir
