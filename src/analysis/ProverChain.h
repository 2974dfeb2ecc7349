/** \file The prover used by lowering: the built-in BoundsProver first (cheap), then Z3 when
 * enabled and available. Answers are cached by the structural key of the query, so repeated
 * obligations cost nothing; statistics say who proved what. Correctness never depends on it:
 * an obligation nobody proves is reported, never assumed. */
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/Bounds.h"

namespace cora::ir {

/** An obligation nobody proved: what asked (the pass's context), the goal, and why. */
struct UnprovedObligation {
    std::string context, goal, why;
};

struct ProverStats {
    int queries = 0, cache_hits = 0, proved_by_bounds = 0, proved_by_z3 = 0, unproved = 0;
    int guards_removed = 0, guards_kept = 0; ///< schedule guards (filled in by lowering)
    std::vector<UnprovedObligation> unproved_obligations;
    std::string str() const;
    /** str(), then one line per unproved obligation: where it was asked, the goal, why. */
    std::string report() const;
};

class ProverChain : public Prover {
public:
    explicit ProverChain(bool use_z3);
    bool prove_nonneg(const Expr &e, const Scope &scope) override;
    std::string last_failure() const override { return failure_; }
    const ProverStats &stats() const { return stats_; }
    bool has_z3() const { return z3_ != nullptr; }
    /** What the next queries are for (e.g. "schedule of Func 'Y' (main.cpp:42)"), recorded with
     * each unproved obligation. */
    void set_context(std::string context) { context_ = std::move(context); }

private:
    BoundsProver bounds_;
    std::unique_ptr<Prover> z3_;
    std::map<std::string, bool> cache_;
    std::map<std::string, std::string> failures_;
    ProverStats stats_;
    std::string failure_, context_;
};

} // namespace cora::ir
