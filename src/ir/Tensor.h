/** \file Tensors, layouts and the prelude's aux-array specs, as IR symbols.
 *
 * A layout is an ordered list of named dims, each with an extent expression that may use the
 * index variables of the dims before it (a vdim) or none (a cdim). The same layout type serves
 * as a Func's loop domain and as a tensor's storage layout. */
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/IR.h"
#include "ir/Schedule.h"

namespace cora::ir {

struct LayoutDim {
    std::shared_ptr<const DimNode> dim;
    Expr extent;
};
using Layout = std::vector<LayoutDim>;

struct TensorNode;

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
    Type type;
    bool is_input;
    Layout domain;  ///< loop domain (Funcs) or logical shape (inputs): what may be read
    Layout storage; ///< storage layout; dims in the same order as domain, extents >= domain's
    std::vector<StorageTransform> storage_transforms; ///< storage -> physical layout, in order
    Expr value;                                       ///< definition (Funcs), in terms of domain dim variables
    /** Integer inputs read as indices (BSR column indices, gather lists): every element is in
     * [min_value, max_value], an axiom for the prover that the kernel checks on every call. */
    bool has_value_range = false;
    int64_t min_value = 0, max_value = 0;
    /** An index tensor's elements known when compiling, in packed storage order
     * (Tensor::index_values), or null: reads at a constant offset fold to them, and kernels check
     * that the buffer passed at run time holds exactly these values. */
    std::shared_ptr<const std::vector<int64_t>> static_values;
    std::string defined_at; ///< "file:line" of the compute() call, for messages; empty when unknown
    /** How its loops are built (ir/Schedule.h): recorded by the front end, read by lowering
     * (front::schedule_of). Null for inputs. */
    std::shared_ptr<Schedule> schedule;
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
/** The tensor whose storage an op's loops write: itself, or for an op-split tail its Func. */
inline const TensorNode &store_target(const TensorNode &t) { return t.is_split_tail ? *split_head(t) : t; }
/** The indices of store_target(t) that the op writes, in terms of t's domain vars. */
std::vector<Expr> store_indices(const TensorNode &t);

/** What an aux array is and how it is built (analysis/AuxKind.h): an object of its kind (prefix
 * sums, fusion maps, longest-first orders, ...), holding the parameters it owns. The IR only
 * carries it; nothing outside the kind's own file looks inside. */
class AuxKind;

/** An aux array built by the prelude: its kind, the layout it is stored in (flattened like a
 * tensor's) and its key. */
struct AuxSpec {
    std::shared_ptr<const AuxKind> kind;
    Layout layout;
    std::string key; ///< structural identity: equal keys build equal arrays
};

/** The declared value range of an atom the prover bounds by declaration alone: a UF call (length
 * array, aux array), a read of an integer tensor with a value range (Tensor::index_range), or a
 * widening integer cast of either. Nullopt for everything else. */
std::optional<std::pair<int64_t, int64_t>> declared_range(const Expr &e);
/** Whether `e` is such an atom (declared_range(e) has a value). */
inline bool is_ranged_atom(const Expr &e) { return declared_range(e).has_value(); }

/** A printable identity of an expression that distinguishes dims/UFs/vars by id. */
std::string structural_key(const Expr &e);

} // namespace cora::ir
