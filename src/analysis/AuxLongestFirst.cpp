/** \file Aux kind: longest-first orders (AuxSpec::Kind::LongestFirst). Over layout [d: E], entry p
 * is the index of d with the p-th largest cost (`summand`, in d's variable), ties by index: a
 * permutation of [0, E) that a remap runs rows in, so the longest rows start first. */
#include <algorithm>

#include "analysis/AuxKind.h"

namespace cora::ir {

namespace {

class LongestFirstKind : public AuxKind {
public:
    const char *name() const override { return "longest-first order"; }

    /** The costs into a scratch array, then the rank of each index in a stable descending sort
     * (index j ranks before i when its cost is larger, or equal and j < i), written at that rank.
     * O(E^2) comparisons over E remapped rows, parallel over i; E is a number of rows or row
     * blocks (thousands), so this stays far below the kernel. */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        const AuxSpec &spec = a.spec();
        const VarPtr &d = spec.layout[0].dim->var;
        Expr n = spec.outer_extent;
        VarPtr cost = make_var(a.name + "_cost", VarRole::Buffer, Int64);
        VarPtr i = make_var("i", VarRole::Index), j = make_var("j", VarRole::Index);
        VarPtr rank = make_var("rank", VarRole::Local, Int64);
        Expr iv = var_expr(i), jv = var_expr(j);
        Stmt costs = For::make(d, IntImm::make(0), n, ForKind::Serial, Store::make(cost, var_expr(d), spec.summand));
        Expr ci = Load::make(cost, iv), cj = Load::make(cost, jv);
        Expr before = Or::make(GT::make(cj, ci), And::make(EQ::make(cj, ci), LT::make(jv, iv)));
        Stmt count = For::make(
            j, IntImm::make(0), n, ForKind::Serial,
            Assign::make(rank, Add::make(var_expr(rank), Select::make(before, IntImm::make(1), IntImm::make(0)))));
        Stmt place =
            LocalVar::make(rank, IntImm::make(0), Block::make({count, Store::make(a.buffer, var_expr(rank), iv)}));
        return Allocate::make(cost, n,
                              Block::make({costs, For::make(i, IntImm::make(0), n, ForKind::Parallel, place)}));
    }

    /** A passed order is checked where it is used: each remap checks that its array is a
     * permutation of the loop's range (AddArgumentChecks.cpp), user length arrays included. */
    Stmt check(const AuxArray &, AuxTable &) const override { return Stmt(); }

    std::vector<int64_t> build_on_host(const AuxSpec &spec, const std::string &, const AuxHost &host) const override {
        Interpreter in = host.interpreter();
        int64_t n = in.eval_int(spec.outer_extent);
        std::vector<int64_t> cost((size_t)n), order((size_t)n);
        const VarNode *v = spec.layout[0].dim->var.get();
        for (int64_t i = 0; i < n; i++) {
            in.ints[v] = i;
            cost[(size_t)i] = in.eval_int(spec.summand);
            order[(size_t)i] = i;
        }
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return cost[(size_t)a] > cost[(size_t)b]; });
        return order;
    }

    /** A permutation of [0, E): below E. */
    std::vector<Expr> facts(const UFCall &call, const Expr &value) const override {
        return {LE::make(value, Sub::make(call.fn->aux->outer_extent, IntImm::make(1)))};
    }
};

} // namespace

const AuxKind &longest_first_kind() {
    static const LongestFirstKind kind;
    return kind;
}

} // namespace cora::ir
