/** \file The Z3 backend of the Prover interface.
 *
 * A query "e >= 0 over this scope" becomes: scope variables within their ranges, every
 * uninterpreted-function call an application of a Z3 function with its declared range asserted
 * for that ground term (quantifier-free; congruence gives equal values for equal arguments),
 * params within their ranges; then Z3 checks that e < 0 is unsatisfiable. Integer division and
 * modulo are encoded with the generated code's floor semantics. Anything Z3 cannot express
 * (float values, loads) becomes a fresh unconstrained atom, which keeps every proof sound.
 * Deterministic: a resource limit (rlimit), not a wall-clock timeout, bounds each query; names
 * are numbered per query. Unknown, sat and resource-out all mean "not proved". */
#pragma once

#include <memory>

#include "analysis/Bounds.h"

namespace cora::ir {

/** True when cora was built with Z3. */
bool z3_available();

/** A Z3-backed prover, or nullptr when cora was built without Z3. `rlimit` bounds each query. */
std::unique_ptr<Prover> make_z3_prover(uint64_t rlimit = 4000000);

} // namespace cora::ir
