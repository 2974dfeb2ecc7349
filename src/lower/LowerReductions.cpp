/** \file Pass: turn Reduce expressions into accumulator loops.
 *
 * `S[i] = a + sum(k < n(i): f(k))` becomes
 *     local acc = 0;  for k in [0, n(i)): acc = acc + f(k);  S[i] = a + acc
 * Reductions nested inside a reduction's body are lowered inside its loop.
 * Requires: loop nests with Provide (and Store into cache tiles). Ensures: no Reduce node is left.
 * Tests: tests/correctness/softmax.cpp, vgemm.cpp, trmm.cpp. */
#include <functional>

#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

/** The outermost Reduce in e (pre-order), or undefined. */
Expr find_reduce(const Expr &e) {
    Expr found;
    struct Finder : IRVisitor {
        Expr *out;
        void visit(const Expr &x) override {
            if (out->defined() || !x.defined()) return;
            if (x.as<Reduce>()) {
                *out = x;
                return;
            }
            IRVisitor::visit(x);
        }
        using IRVisitor::visit;
    } f;
    f.out = &found;
    f.visit(e);
    return found;
}

Expr replace_node(const Expr &e, const Expr &target, const Expr &with) {
    struct Replacer : IRMutator {
        const Expr *t, *w;
        Expr mutate(const Expr &x) override { return x.same_as(*t) ? *w : IRMutator::mutate(x); }
        using IRMutator::mutate;
    } r;
    r.t = &target;
    r.w = &with;
    return r.mutate(e);
}

Stmt lower_value(const Expr &value, const std::function<Stmt(const Expr &)> &consume) {
    Expr r = find_reduce(value);
    if (!r.defined()) return consume(value);
    const Reduce *red = r.as<Reduce>();
    VarPtr acc = make_var("acc_" + red->var->name, VarRole::Local, red->type);
    Expr acc_e = var_expr(acc);
    Stmt loop_body =
        lower_value(red->body, [&](const Expr &b) { return Assign::make(acc, reduce_combine(red->op, acc_e, b)); });
    Stmt loop = For::make(red->var, IntImm::make(0), red->extent, ForKind::Serial, loop_body);
    Stmt rest = lower_value(replace_node(value, r, acc_e), consume);
    return LocalVar::make(acc, reduce_identity(red->op, red->type), Block::make({loop, rest}));
}

class Lowerer : public IRMutator {
protected:
    Stmt mutate_node(const Provide *op, const Stmt &self) override {
        if (!find_reduce(op->value).defined()) return self;
        return lower_value(op->value, [&](const Expr &v) { return Provide::make(op->tensor, op->indices, v); });
    }
    Stmt mutate_node(const Store *op, const Stmt &self) override { // into a cache_write tile
        if (!find_reduce(op->value).defined()) return self;
        return lower_value(op->value, [&](const Expr &v) { return Store::make(op->buffer, op->index, v); });
    }
};

} // namespace

Stmt lower_reductions(const Stmt &s) {
    Lowerer l;
    return l.mutate(s);
}

} // namespace cora::ir
