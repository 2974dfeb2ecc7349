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

struct TensorNode {
    std::string name;
    uint64_t id;
    Type type;
    bool is_input;
    Layout domain;   ///< loop domain (Funcs); for inputs equal to storage
    Layout storage;  ///< storage layout; dims in the same order as domain
    Expr value;      ///< definition (Funcs), in terms of domain dim variables
};
using TensorPtr = std::shared_ptr<const TensorNode>;

/** An aux array built by the prelude: for every index of the layout's outer dims (all but the
 * last), A[outer..., x] = sum over x' < x of `summand`(outer..., x'), for x in [0, extent of
 * the last dim]; i.e. the last dim of `layout` has extent E+1 where E is the summed range.
 * `summand` uses the index variables of `layout`'s dims; `summed_var` is the last one. */
struct AuxSpec {
    Layout layout;
    Expr summand;
    std::string key;  ///< structural identity: equal keys build equal arrays
};

/** A printable identity of an expression that distinguishes dims/UFs/vars by id. */
std::string structural_key(const Expr &e);

}  // namespace cora::ir
