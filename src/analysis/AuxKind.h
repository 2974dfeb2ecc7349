/** \file Aux-array kinds as objects: the interface. Each kind (prefix sums, fusion maps,
 * longest-first orders; later active-tile lists) is a subclass of AuxKind, defined in one file of
 * its format's folder (formats/ragged/AuxPrefixSum.cpp, AuxFusionMap.cpp, AuxLongestFirst.cpp) with
 * its parameters and everything cora needs from it. An aux array's AuxSpec (ir/Tensor.h) holds its kind object; nothing
 * else tests which kind an array is: the simplifier, the static folder, the layout description, the prover and argument
 * inference ask the kind.
 *   - build:         IR that fills the array from its inputs, written once and used by both
 *                    paths: AOT kernels compile it to build their aux arrays
 *                    (lower/BuildAuxArrays.cpp); the host prelude (runtime/RaggedShape.cpp) runs
 *                    it in the interpreter (analysis/InterpreterStmt.cpp), once per batch, and
 *                    shares the result between JIT kernels;
 *   - check:         IR that checks an array a caller passed (JIT kernels,
 *                    lower/AddArgumentChecks.cpp): the kernel indexes memory with it;
 *   - inputs:        what the build reads besides the layout's extents (expressions of params and
 *                    length arrays, other aux arrays, shape tensors: a mask), so that a kernel building or checking the
 *                    array takes them as arguments and builds those arrays first;
 *   - facts:         what the prover may assume about one call (the build or the check makes it
 *                    hold), beyond the declared value range (analysis/Z3Prover.cpp);
 *   - prefix_summand / fused_loop_map: the properties the prover's pairwise prefix-sum axioms,
 *                    static folding, layout descriptions, the simplifier's P(fo(f)) + fi(f) = f
 *                    identity (analysis/Simplify.cpp) and cache_read's placement
 *                    (lower/CacheRead.cpp) ask about.
 * Adding a kind: a file with its AuxKind subclass and a constructor of its arrays (as
 * prefix_sum_aux in formats/ragged/StorageLayout.h makes them: a UFNode whose AuxSpec holds the kind), and tests:
 * the built array against a definition written in the test (tests/unit/aux_kinds.cpp), kernels
 * through the JIT and AOT paths. */
#pragma once

#include <functional>
#include <memory>
#include <optional>
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

/** What an array's build reads besides its layout's extents. */
struct AuxInputs {
    std::vector<Expr> exprs;                           ///< in params, length arrays and aux calls
    std::vector<std::shared_ptr<const UFNode>> arrays; ///< aux arrays it reads or is checked against
    /** Shape tensors (ShapeTensor: a mask, coordinates) its build reads element by element: kernels
     * that build or check the array take them as arguments, bound from the RaggedShape. */
    std::vector<std::shared_ptr<const UFNode>> tensors;
};

/** A fusion map's role in the inverse law P(fo(f)) + fi(f) = f. */
struct FusedLoopMap {
    bool outer;            ///< fo (else fi)
    const UFNode *prefix;  ///< the prefix sum P it inverts
    const UFNode *partner; ///< fi: its fo; fo: null
};

/** What a native host build (AuxKind::host_build) reads: the value of an expression of params,
 * a shape tensor's values (row-major, count already checked), an aux array built before it. */
struct HostAuxInputs {
    std::function<int64_t(const Expr &)> eval;
    std::function<const std::vector<int32_t> &(const UFNode *)> shape_tensor;
    std::function<const std::vector<int64_t> &(const UFNode *)> aux_array;
};

class AuxKind {
public:
    virtual ~AuxKind() = default;
    virtual const char *name() const = 0;

    /** IR filling `a.buffer` (its flat layout's size, allocated by the caller) from its inputs,
     * after they were checked; the aux arrays it reads are built before it. It runs compiled
     * (AOT) and interpreted (host prelude): integer scalars and buffers only, loads and stores at
     * in-range indices, every sum that may overflow under an Assert (arithmetic is
     * overflow-checked on both paths). */
    virtual Stmt build(const AuxArray &a, AuxTable &table) const = 0;
    /** IR checking a caller-passed `a.buffer` (its size already checked) against its definition;
     * undefined when another check covers it. Messages name `a.name`. */
    virtual Stmt check(const AuxArray &a, AuxTable &table) const = 0;
    virtual AuxInputs inputs() const = 0;
    /** Optionally, the same array built by native code for the host prelude, which otherwise
     * interprets build(): for kinds whose build visits every element of a large input (a mask of
     * H x W positions), where the interpreter would cost more than the kernels. `out` has the
     * layout's size; failures are RuntimeErrors with build()'s messages. The IR build stays the
     * definition (AOT kernels compile it); tests hold the two equal. False: no native build. */
    virtual bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const { return false; }
    /** Facts (boolean IR) that hold for the call `call`, whose value `value` stands for. */
    virtual std::vector<Expr> facts(const UFCall &call, const Expr &value) const { return {}; }

    /** A prefix sum's summand: P(.., x) = sum of this non-negative summand (in the layout's
     * variables) over x' < x, monotone in its last argument. Null for other kinds. */
    virtual const Expr *prefix_summand() const { return nullptr; }
    bool is_prefix_sum() const { return prefix_summand() != nullptr; }
    /** For a map of a fused loop's iterations back to the dims it fused: its role. */
    virtual std::optional<FusedLoopMap> fused_loop_map() const { return std::nullopt; }
    bool maps_fused_loop() const { return fused_loop_map().has_value(); }
};

/** The kind of `spec`. */
inline const AuxKind &aux_kind(const AuxSpec &spec) { return *spec.kind; }
/** The kind of `fn`'s array, or null when `fn` is not an aux array. */
inline const AuxKind *aux_kind_of(const UFNode &fn) { return fn.aux ? fn.aux->kind.get() : nullptr; }

} // namespace cora::ir
