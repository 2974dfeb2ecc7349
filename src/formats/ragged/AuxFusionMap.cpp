/** \file Aux kinds: fusion maps fo and fi. A fused loop f over a dense outer dim o (extent E_o)
 * and a ragged inner dim i (extent E_i(o)) runs over [0, P(E_o)) plus the pad segment of bulk
 * padding (the total padded up to a multiple of `pad`), where P is the prefix sum of E_i;
 * fo(f) = o and fi(f) = f - P(o) for P(o) <= f < P(o + 1), so P(fo(f)) + fi(f) = f, and the pad
 * segment belongs to the last o: fo = E_o - 1, fi = f - P(E_o - 1). */
#include "formats/ragged/RaggedKinds.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

class FusionMapKind : public AuxKind {
public:
    FusionMapKind(bool outer, std::shared_ptr<const UFNode> prefix, std::shared_ptr<const UFNode> partner,
                  Expr outer_extent)
        : outer_(outer), prefix_(std::move(prefix)), partner_(std::move(partner)),
          outer_extent_(std::move(outer_extent)) {}
    const char *name() const override { return outer_ ? "fusion map fo" : "fusion map fi"; }
    std::optional<FusedLoopMap> fused_loop_map() const override {
        return FusedLoopMap{outer_, prefix_.get(), partner_.get()};
    }
    /** Built from P; checked against P and (fi) its fo. */
    AuxInputs inputs() const override {
        AuxInputs in{{outer_extent_}, {prefix_}, {}};
        if (partner_) in.arrays.push_back(partner_);
        return in;
    }

    /** Per outer index o, the run [P(o), P(o + 1)) with P(o) bound once (the host prelude
     * interprets this: one UF read per row, not per entry). */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        const AuxSpec &spec = a.spec();
        auto P = [&](const Expr &x) { return UFCall::make(prefix_, {x}); };
        VarPtr o = make_var("o", VarRole::Index), i = make_var("i", VarRole::Index);
        VarPtr start = make_var("start", VarRole::Local);
        Expr ov = var_expr(o), iv = var_expr(i), sv = var_expr(start);
        Stmt rows = For::make(
            o, IntImm::make(0), outer_extent_, ForKind::Serial,
            LetStmt::make(start, P(ov),
                          For::make(i, IntImm::make(0), Sub::make(P(Add::make(ov, IntImm::make(1))), sv),
                                    ForKind::Serial, Store::make(a.buffer, Add::make(sv, iv), outer_ ? ov : iv))));
        // The pad segment [P(E_o), n) of bulk padding belongs to the last outer index: fi
        // continues counting from the last run's start.
        Expr last = Sub::make(outer_extent_, IntImm::make(1));
        VarPtr pad_start = make_var("pad_start", VarRole::Local), last_start = make_var("last_start", VarRole::Local);
        Expr ps = var_expr(pad_start);
        VarPtr g = make_var("g", VarRole::Index);
        Expr gv = var_expr(g);
        Stmt fill = For::make(g, IntImm::make(0), Sub::make(spec.layout[0].extent, ps), ForKind::Serial,
                              Store::make(a.buffer, Add::make(ps, gv),
                                          outer_ ? last : Add::make(Sub::make(ps, var_expr(last_start)), gv)));
        Stmt pad = LetStmt::make(pad_start, P(outer_extent_), outer_ ? fill : LetStmt::make(last_start, P(last), fill));
        return Block::make({rows, IfThenElse::make(GT::make(outer_extent_, IntImm::make(0)), pad, Stmt())});
    }

    /** fo/fi must be the fusion maps of their prefix sum P (the kernel indexes memory with them):
     * 0 <= fo[f] < E_o; P[fo[f]] <= f < P[fo[f] + 1] inside the total, fo[f] = E_o - 1 in the pad
     * segment; fi[f] = f - P[fo[f]]. O(total) per call, cheap next to the work per entry. */
    Stmt check(const AuxArray &a, AuxTable &) const override {
        const AuxSpec &spec = a.spec();
        VarPtr f = make_var("f", VarRole::Index);
        Expr fv = var_expr(f);
        auto P = [&](const Expr &x) { return UFCall::make(prefix_, {x}); };
        Expr eo = outer_extent_;
        Expr self = UFCall::make(a.fn, {fv});
        std::vector<Stmt> body;
        if (outer_) {
            body.push_back(Assert::make(
                And::make(GE::make(self, IntImm::make(0)), LT::make(self, eo)),
                {"fusion map '" + a.name + "': entry ", " is ", ", expected a value in [0, ", ")"}, {fv, self, eo}));
            Expr inside = And::make(LE::make(P(self), fv), LT::make(fv, P(Add::make(self, IntImm::make(1)))));
            Expr ok = Select::make(LT::make(fv, P(eo)), inside, EQ::make(self, Sub::make(eo, IntImm::make(1))));
            body.push_back(Assert::make(ok,
                                        {"fusion map '" + a.name + "': entry ", " is ",
                                         ", which is not the outer index of that fused iteration"},
                                        {fv, self}));
        } else {
            Expr want = Sub::make(fv, P(UFCall::make(partner_, {fv})));
            body.push_back(Assert::make(EQ::make(self, want),
                                        {"fusion map '" + a.name + "': entry ", " is ", ", expected ", ""},
                                        {fv, self, want}));
        }
        return For::make(f, IntImm::make(0), spec.layout[0].extent, ForKind::Serial, Block::make(body));
    }

    /** 0 <= fo(x) < E_o everywhere (pad segment included); the inverse law P(fo(x)) + fi(x) = x;
     * inside the total (not in the pad segment) fi(x) < E_i(fo(x)). */
    std::vector<Expr> facts(const UFCall &call, const Expr &value) const override {
        if (outer_) return {LE::make(value, Sub::make(outer_extent_, IntImm::make(1)))};
        const Expr &x = call.args[0];
        Expr fo = UFCall::make(partner_, {x});
        const AuxSpec &p = *prefix_->aux;
        Expr inner_extent = substitute(*p.kind->prefix_summand(), p.layout[0].dim->var.get(), fo);
        Expr total = UFCall::make(prefix_, {outer_extent_});
        return {EQ::make(value, Sub::make(x, UFCall::make(prefix_, {fo}))),
                Or::make(GE::make(x, total), LT::make(value, inner_extent))};
    }

private:
    bool outer_;
    std::shared_ptr<const UFNode> prefix_;  ///< the 1-D prefix sum P they invert
    std::shared_ptr<const UFNode> partner_; ///< fi: its fo (checked together)
    Expr outer_extent_;
};

} // namespace

std::shared_ptr<const AuxKind> fusion_map_kind(bool outer, std::shared_ptr<const UFNode> prefix,
                                               std::shared_ptr<const UFNode> partner, Expr outer_extent) {
    CORA_CHECK(prefix && prefix->aux && prefix->aux->kind->is_prefix_sum() && prefix->arity == 1,
               "fusion maps need a 1-D prefix sum");
    CORA_CHECK(outer || partner, "a fusion map fi needs its fo");
    return std::make_shared<const FusionMapKind>(outer, std::move(prefix), std::move(partner), std::move(outer_extent));
}

} // namespace cora::ir
