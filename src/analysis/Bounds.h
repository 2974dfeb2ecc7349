/** \file Symbolic bounds and the prover that compile-time checks use.
 *
 * A Scope lists loop variables from outermost to innermost, each with a range
 * [min, min + extent - 1] whose bounds may use outer variables. To bound an expression, the
 * innermost variable is eliminated first by substituting its symbolic bound (monotone rules
 * for +, -, constant *, min, max, select, floor division by a positive constant), the result is
 * simplified (so correlated terms such as len(b) - (len(b) - 1) cancel), and so on outwards.
 * What is left is bounded with the declared ranges of params and length arrays.
 * Every rule is sound: a `true` answer holds for every input within the declared ranges;
 * `false` means "not proved". */
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace cora::ir {

struct ScopeEntry {
    const VarNode *var;
    Expr min, extent; ///< var takes values min .. min + extent - 1
};
using Scope = std::vector<ScopeEntry>;

/** A symbolic lower (or upper) bound of e over all values of the scope's variables, or
 * undefined when none is found. The result mentions scope variables only inside UF-call
 * arguments (those calls are bounded by their declared ranges). */
Expr symbolic_bound(const Expr &e, const Scope &scope, bool upper);

/** Constant bound of e using the ranges of params and UF values (nullopt: unbounded). */
std::optional<int64_t> constant_bound(const Expr &e, bool upper);

/** Proof obligations. Deterministic; the future Z3 backend plugs in behind this interface. */
class Prover {
public:
    virtual ~Prover() = default;
    /** Does e >= 0 hold for every value of the scope's variables and every input in range? */
    virtual bool prove_nonneg(const Expr &e, const Scope &scope) = 0;
    /** A short reason for the last failed proof (the bound that could not be shown >= 0). */
    virtual std::string last_failure() const = 0;
};

/** The built-in prover: symbolic bounds + interval arithmetic over declared ranges. */
class BoundsProver : public Prover {
public:
    bool prove_nonneg(const Expr &e, const Scope &scope) override;
    std::string last_failure() const override { return failure_; }

private:
    std::string failure_;
};

/** `e` with x / c and x % c (c a positive constant) replaced by 0 and x where the prover shows
 * 0 <= x < c over `scope`, then simplified: (o * 32 + i) / 32 becomes o for i in [0, 32). */
Expr fold_small_div_mod(const Expr &e, const Scope &scope, Prover &prover);

} // namespace cora::ir
