/** \file Reference evaluation: a pipeline's definitions evaluated directly, element by element,
 * in double precision, with no lowering, flattening or code generation involved. Every
 * correctness test compares compiled kernels against it. */
#pragma once

#include <utility>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** Values of each output of `p`, in the lexicographic order of its loop domain (which is its
 * packed order when stored without padding). `inputs` binds every input tensor. */
std::vector<std::vector<double>> reference_evaluate(const Pipeline &p, const RaggedShape &shape,
                                                    const std::vector<std::pair<Tensor, const Buffer *>> &inputs);

} // namespace cora
