/** \file Helpers shared by the front end's files (internal): shapes to layouts, and the checks
 * every primitive makes on the loops and storage it names. */
#pragma once

#include <memory>
#include <string>

#include "cora/Tensor.h"
#include "ir/Tensor.h"

namespace cora::front {

ir::Layout to_layout(const Shape &shape);
Shape to_shape(const ir::Layout &l);

/** A new tensor node (input or Func), its shape validated. */
std::shared_ptr<ir::TensorNode> make_tensor(const std::string &name, const Shape &shape, Type type, bool input);

/** Storage transforms belong to the tensor that owns the storage, not to an op-split tail. */
void require_storage_owner(const ir::TensorNode &t, const char *what);

/** Whether `d` currently names a loop of `t` (its dims and reduction dim after the transforms). */
bool is_live_loop(const ir::TensorNode &t, const ir::DimNode *d);
/** Naming the reduction dim in a loop primitive makes it a loop of the nest. */
void claim_reduction_loop(ir::TensorNode &t, const Dim &d);
/** Primitives whose extra or reordered iterations would change a reduction's result. */
void reject_reduction_loop(const ir::TensorNode &t, const Dim &d, const char *what, const char *why);

} // namespace cora::front
