#include "analysis/ProverChain.h"

#include "analysis/Z3Prover.h"
#include "ir/IRPrinter.h"
#include "ir/Tensor.h"

namespace cora::ir {

std::string ProverStats::str() const {
    return std::to_string(queries) + " obligations: " + std::to_string(cache_hits) + " cached, " +
           std::to_string(proved_by_bounds) + " proved by bounds, " + std::to_string(proved_by_z3) + " proved by Z3, " +
           std::to_string(unproved) + " unproved; schedule guards: " + std::to_string(guards_removed) +
           " proved away, " + std::to_string(guards_kept) + " kept";
}

std::string ProverStats::report() const {
    std::string s = str();
    for (const UnprovedObligation &u : unproved_obligations) // each kept a guard or a check, or failed the compile
        s += "\nunproved in " + (u.context.empty() ? std::string("lowering") : u.context) + ": " + u.goal + " (" +
             u.why + ")";
    return s;
}

ProverChain::ProverChain(bool use_z3) {
    if (use_z3) z3_ = make_z3_prover();
}

bool ProverChain::prove_nonneg(const Expr &e, const Scope &scope) {
    stats_.queries++;
    std::string key = structural_key(e);
    for (const ScopeEntry &s : scope)
        key += " ; " + s.var->name + "#" + std::to_string(s.var->id) + " in " + structural_key(s.min) + " + " +
               structural_key(s.extent);
    auto hit = cache_.find(key);
    if (hit != cache_.end()) {
        stats_.cache_hits++;
        if (!hit->second) failure_ = failures_[key];
        return hit->second;
    }
    bool proved = bounds_.prove_nonneg(e, scope);
    if (proved) {
        stats_.proved_by_bounds++;
    } else {
        failure_ = bounds_.last_failure();
        if (z3_ && z3_->prove_nonneg(e, scope)) {
            proved = true;
            stats_.proved_by_z3++;
        } else {
            if (z3_) failure_ += "; " + z3_->last_failure();
            stats_.unproved++;
            failures_[key] = failure_;
            stats_.unproved_obligations.push_back(UnprovedObligation{context_, print(e) + " >= 0", failure_});
        }
    }
    cache_[key] = proved;
    return proved;
}

} // namespace cora::ir
