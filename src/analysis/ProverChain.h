/** \file The prover used by lowering: the built-in BoundsProver first (cheap), then Z3 when
 * enabled and available. Answers are cached by the structural key of the query, so repeated
 * obligations cost nothing; statistics say who proved what. Correctness never depends on it:
 * an obligation nobody proves is reported, never assumed. */
#pragma once

#include <map>
#include <memory>
#include <string>

#include "analysis/Bounds.h"

namespace cora::ir {

struct ProverStats {
    int queries = 0, cache_hits = 0, proved_by_bounds = 0, proved_by_z3 = 0, unproved = 0;
    int guards_removed = 0, guards_kept = 0; ///< schedule guards (filled in by lowering)
    std::string str() const;
};

class ProverChain : public Prover {
public:
    explicit ProverChain(bool use_z3);
    bool prove_nonneg(const Expr &e, const Scope &scope) override;
    std::string last_failure() const override { return failure_; }
    const ProverStats &stats() const { return stats_; }
    bool has_z3() const { return z3_ != nullptr; }

private:
    BoundsProver bounds_;
    std::unique_ptr<Prover> z3_;
    std::map<std::string, bool> cache_;
    std::map<std::string, std::string> failures_;
    ProverStats stats_;
    std::string failure_;
};

} // namespace cora::ir
