/** \file Aux kind: longest-first orders. Over layout [d: E], entry p is the index of d with the
 * p-th largest cost (the kind's `cost`, in d's variable), ties by index: a permutation of [0, E)
 * that a remap runs rows in, so the longest rows start first. */
#include "formats/ragged/RaggedKinds.h"

namespace cora::ir {

namespace {

class LongestFirstKind : public AuxKind {
public:
    LongestFirstKind(Expr extent, Expr cost) : extent_(std::move(extent)), cost_(std::move(cost)) {}
    const char *name() const override { return "longest-first order"; }
    AuxInputs inputs() const override { return AuxInputs{{cost_, extent_}, {}, {}}; }

    /** The costs into a scratch array, the identity into the array, then a stable bottom-up
     * merge sort by descending cost (ties keep index order): pass p merges runs of width 2^p
     * into a scratch order and copies it back. O(E log E) for E remapped rows; the same
     * statements run compiled in AOT kernels and interpreted in the host prelude, where a
     * quadratic rank count would cost seconds for tens of thousands of rows. */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        const AuxSpec &spec = a.spec();
        const VarPtr &d = spec.layout[0].dim->var;
        Expr n = extent_;
        auto var = [&](const std::string &name, VarRole role) { return make_var(name, role, Int64); };
        VarPtr cost = make_var(a.name + "_cost", VarRole::Buffer, Int64);
        VarPtr merged = make_var(a.name + "_merged", VarRole::Buffer, Int64);
        VarPtr pass = var("pass", VarRole::Index), run = var("run", VarRole::Index), t = var("t", VarRole::Index);
        VarPtr width = var("width", VarRole::Local), lo = var("lo", VarRole::Local), mid = var("mid", VarRole::Local),
               hi = var("hi", VarRole::Local), i = var("i", VarRole::Local), j = var("j", VarRole::Local);
        VarPtr take_left = var("take_left", VarRole::Local);
        auto v = [](const VarPtr &x) { return var_expr(x); };
        auto c = [](int64_t x) { return IntImm::make(x); };
        // Reads at min(k, n - 1): an exhausted run's position may equal n, and both sides of a
        // Select may be evaluated; the clamped read is never chosen then.
        auto cost_at = [&](const Expr &k) {
            return Load::make(cost, Load::make(a.buffer, Min::make(k, Sub::make(n, c(1)))));
        };
        Expr left_first =
            And::make(LT::make(v(i), v(mid)), Or::make(GE::make(v(j), v(hi)), GE::make(cost_at(v(i)), cost_at(v(j)))));
        Stmt step = LetStmt::make(
            take_left, Select::make(left_first, c(1), c(0)),
            Block::make({Store::make(merged, v(t),
                                     Select::make(EQ::make(v(take_left), c(1)),
                                                  Load::make(a.buffer, Min::make(v(i), Sub::make(n, c(1)))),
                                                  Load::make(a.buffer, Min::make(v(j), Sub::make(n, c(1)))))),
                         Assign::make(i, Add::make(v(i), v(take_left))),
                         Assign::make(j, Add::make(v(j), Sub::make(c(1), v(take_left))))}));
        Stmt merge_run = LetStmt::make(
            lo, Mul::make(v(run), Mul::make(v(width), c(2))),
            LetStmt::make(mid, Min::make(Add::make(v(lo), v(width)), n),
                          LetStmt::make(hi, Min::make(Add::make(v(lo), Mul::make(v(width), c(2))), n),
                                        LocalVar::make(i, v(lo),
                                                       LocalVar::make(j, v(mid),
                                                                      For::make(t, v(lo), Sub::make(v(hi), v(lo)),
                                                                                ForKind::Serial, step))))));
        // width < n, so 2 * width and the run count stay far from overflow; 63 passes cover any
        // n below 2^63.
        Expr runs = Div::make(Add::make(n, Sub::make(Mul::make(v(width), c(2)), c(1))), Mul::make(v(width), c(2)));
        Stmt one_pass = IfThenElse::make(
            LT::make(v(width), n),
            Block::make({For::make(run, c(0), runs, ForKind::Serial, merge_run),
                         For::make(t, c(0), n, ForKind::Serial, Store::make(a.buffer, v(t), Load::make(merged, v(t)))),
                         Assign::make(width, Mul::make(v(width), c(2)))}));
        Stmt sort = Allocate::make(
            merged, n, LocalVar::make(width, c(1), For::make(pass, c(0), c(63), ForKind::Serial, one_pass)));
        Stmt costs = For::make(d, c(0), n, ForKind::Serial,
                               Block::make({Store::make(cost, v(d), cost_), Store::make(a.buffer, v(d), v(d))}));
        return Allocate::make(cost, n, Block::make({costs, sort}));
    }

    /** A passed order is checked where it is used: each remap checks that its array is a
     * permutation of the loop's range (AddArgumentChecks.cpp), user length arrays included. */
    Stmt check(const AuxArray &, AuxTable &) const override { return Stmt(); }

    /** A permutation of [0, E): below E. */
    std::vector<Expr> facts(const UFCall &, const Expr &value) const override {
        return {LE::make(value, Sub::make(extent_, IntImm::make(1)))};
    }

private:
    Expr extent_, cost_;
};

} // namespace

std::shared_ptr<const AuxKind> longest_first_kind(Expr extent, Expr cost) {
    return std::make_shared<const LongestFirstKind>(std::move(extent), std::move(cost));
}

} // namespace cora::ir
