/** \file Aux-array kinds as one interface: each kind (prefix sums, fusion maps, longest-first
 * orders; later BSR row pointers, active-tile lists) is one AuxKind, defined in one file
 * (AuxPrefixSum.cpp, AuxFusionMap.cpp, AuxLongestFirst.cpp) with everything cora needs from it:
 *   - build:         IR that fills the array from the params and length arrays, written once and
 *                    used by both paths: AOT kernels compile it to build their aux arrays
 *                    (lower/BuildAuxArrays.cpp); the host prelude (runtime/RaggedShape.cpp) runs
 *                    it in the interpreter (analysis/InterpreterStmt.cpp), once per batch, and
 *                    shares the result between JIT kernels;
 *   - check:         IR that checks an array a caller passed (JIT kernels,
 *                    lower/AddArgumentChecks.cpp): the kernel indexes memory with it;
 *   - facts:         what the prover may assume about one call (the build or the check makes it
 *                    hold), beyond the declared value range (analysis/Z3Prover.cpp);
 *   - is_prefix_sum / maps_fused_loop: the properties the prover's pairwise prefix-sum axioms,
 *                    the simplifier's P(fo(f)) + fi(f) = f identity (analysis/Simplify.cpp) and
 *                    cache_read's placement (lower/CacheRead.cpp) ask about.
 * How a kind's arrays are laid out and keyed is its AuxSpec (ir/Tensor.h), made by the functions
 * of StorageLayout.h. Adding a kind: an AuxSpec::Kind value, a file implementing AuxKind, its case
 * in aux_kind() (AuxKind.cpp), a constructor in StorageLayout.h, and tests: the built array against a
 * definition written in the test (tests/unit/aux_kinds.cpp), kernels through the JIT and AOT paths. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "analysis/AuxTable.h"
#include "ir/Tensor.h"

namespace cora::ir {

/** One aux array as a kernel sees it: its function (fn->aux is its spec), the name its messages
 * use and the buffer variable that holds it. */
struct AuxArray {
    std::shared_ptr<const UFNode> fn;
    std::string name;
    VarPtr buffer;
    const AuxSpec &spec() const { return *fn->aux; }
};

class AuxKind {
public:
    virtual ~AuxKind() = default;
    virtual const char *name() const = 0;

    /** IR filling `a.buffer` (its flat layout's size, allocated by the caller) from the params
     * and length arrays, after they were checked; the aux arrays it reads are built before it.
     * It runs compiled (AOT) and interpreted (host prelude): integer scalars and buffers only,
     * loads and stores at in-range indices, every sum that may overflow under an Assert
     * (arithmetic is overflow-checked on both paths). */
    virtual Stmt build(const AuxArray &a, AuxTable &table) const = 0;
    /** IR checking a caller-passed `a.buffer` (its size already checked) against its definition;
     * undefined when another check covers it. Messages name `a.name`. */
    virtual Stmt check(const AuxArray &a, AuxTable &table) const = 0;
    /** Facts (boolean IR) that hold for the call `call`, whose value `value` stands for. */
    virtual std::vector<Expr> facts(const UFCall &call, const Expr &value) const { return {}; }

    /** P(.., x) = sum of a non-negative summand over x' < x: monotone in its last argument. */
    virtual bool is_prefix_sum() const { return false; }
    /** Maps the iterations of a fused loop back to the dims it fused. */
    virtual bool maps_fused_loop() const { return false; }
};

/** The kind of `spec` (immutable, shared by every compilation). */
const AuxKind &aux_kind(const AuxSpec &spec);

} // namespace cora::ir
