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

/** Loop `parent` becomes `outer` (extent ceil(E / factor)) and `inner` (extent factor), with
 * parent = outer * factor + inner. */
struct ScheduleSplit {
    std::shared_ptr<const DimNode> parent, outer, inner;
    int64_t factor;
};

/** How a Func's loop nest is built from its domain, recorded as data and applied by
 * lower/ScheduleLoops. Empty: the default schedule (domain order, outermost loop parallel). */
struct Schedule {
    std::vector<ScheduleSplit> splits;                 ///< applied in order
    std::vector<std::shared_ptr<const DimNode>> order; ///< reorder requests, outermost first
    std::vector<std::pair<std::shared_ptr<const DimNode>, LoopAnnotation>> annotations;
    bool empty() const { return splits.empty() && order.empty() && annotations.empty(); }
};

struct TensorNode {
    std::string name;
    uint64_t id;
    Type type;
    bool is_input;
    Layout domain;  ///< loop domain (Funcs); for inputs equal to storage
    Layout storage; ///< storage layout; dims in the same order as domain
    Expr value;     ///< definition (Funcs), in terms of domain dim variables
    Schedule schedule;
};
using TensorPtr = std::shared_ptr<const TensorNode>;

/** An aux array built by the prelude: for every index of the layout's outer dims (all but the
 * last), A[outer..., x] = sum over x' < x of `summand`(outer..., x'), for x in [0, extent of
 * the last dim]; i.e. the last dim of `layout` has extent E+1 where E is the summed range.
 * `summand` uses the index variables of `layout`'s dims; `summed_var` is the last one. */
struct AuxSpec {
    Layout layout;
    Expr summand;
    std::string key; ///< structural identity: equal keys build equal arrays
};

/** A printable identity of an expression that distinguishes dims/UFs/vars by id. */
std::string structural_key(const Expr &e);

} // namespace cora::ir
