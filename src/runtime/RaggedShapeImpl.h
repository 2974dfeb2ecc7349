/** \file Private: the state behind RaggedShape, shared with Buffer and the reference. */
#pragma once

#include <functional>
#include <map>
#include <mutex>

#include "analysis/Interpreter.h"
#include "cora/Runtime.h"
#include "formats/ragged/StorageLayout.h"

namespace cora {

using ir::FlatLayout;
using ir::Interpreter;
using ir::UFNode;
using ir::VarNode;

struct RaggedShape::Impl {
    std::map<const VarNode *, int64_t> params;
    std::map<const UFNode *, std::vector<int32_t>> lengths;
    mutable std::mutex mu;
    mutable std::map<std::string, std::vector<int64_t>> aux; // by AuxSpec::key
    /** An aux array's flattened layout and the variables its offset uses: those of the layout
     * flattened first. Specs with one key may name different Dims (X[b, len(b)] and
     * X2[b2, len(b2)]), so an index binds these variables, not the caller's spec's. */
    struct FlatAuxLayout {
        FlatLayout flat;
        std::vector<ir::VarPtr> vars; ///< owned: the Dims they came from may be gone
    };
    mutable std::map<std::string, FlatAuxLayout> aux_layouts; // by AuxSpec::key (symbols belong to one table)

    /** Binds a length array or shape tensor `fn` to `values` after checking each value's range
     * (RuntimeError naming it and the element); cached aux arrays are dropped. */
    void bind_input_array(const UFNode &fn, std::vector<int32_t> values);
    /** The same, when the caller knows the values' range [lo, hi] (values is not empty). */
    void bind_input_array(const UFNode &fn, std::vector<int32_t> values, int32_t lo, int32_t hi);
    /** An interpreter bound to this shape's params, lengths and aux arrays. */
    Interpreter interpreter() const;
    /** RuntimeError unless each length array's size matches its count expression. */
    void validate_counts() const;
    /** The cached flattened layout of aux arrays with `spec`'s key (flattened on first use; the
     * caller holds `mu`). */
    const FlatAuxLayout &flat_aux_layout(const ir::AuxSpec &spec) const;
    /** Aux array `fn`, built on first use (by its kind's host builder) and cached by key. */
    const std::vector<int64_t> &build(const UFNode *fn) const;
    /** Flat storage size of a tensor (with storage padding and fusion). */
    int64_t storage_size(const ir::TensorNode &t) const;
    /** Calls f(index, flat storage offset) for every element of t's domain (its logical
     * elements), in lexicographic order. Storage padding is skipped. */
    void for_each_element(const ir::TensorNode &t,
                          const std::function<void(const std::vector<int64_t> &, int64_t)> &f) const;
    int64_t aux_at(const UFNode *fn, const std::vector<int64_t> &idx) const;
    /** Aux array `fn` (an aux function), its length counts validated first; built on first use. */
    const std::vector<int64_t> &aux_array(const UFNode *fn) const;
};

/** The state behind `shape` (not part of the public API). */
const std::shared_ptr<RaggedShape::Impl> &shape_impl(const RaggedShape &shape);

} // namespace cora
