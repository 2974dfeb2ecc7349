/** \file Pass: turn Reduce expressions into accumulator loops.
 *
 * `S[i] = a + sum(k < n(i): f(k))` becomes
 *     local acc = 0;  for k in [0, n(i)): acc = acc + f(k);  S[i] = a + acc
 * Reductions nested inside a reduction's body are lowered inside its loop.
 * A floating-point reduction with a small body and no reduction inside it keeps kPartials partial
 * accumulators instead of one (k = ko * kPartials + lane, then a remainder loop into the first,
 * then a pairwise combine): one accumulator is a chain of dependent adds, one add latency per
 * element, while independent partials run at the adder's throughput and the C compiler turns
 * them into one vector register (a ragged LayerNorm's row sums ran 2x faster). The rounding order
 * differs from a serial loop; max and min are exact in any order.
 * Requires: loop nests with Provide (and Store into cache tiles). Ensures: no Reduce node is left.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/softmax.cpp, vgemm.cpp, trmm.cpp. */
#include <functional>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"

namespace cora::ir {

int step_of(const Expr &index, const VarPtr &k) {
    Expr step = simplify(Sub::make(substitute(index, k.get(), Add::make(var_expr(k), IntImm::make(1))), index));
    const int64_t *c = as_const_int(step);
    return c && (*c == 0 || *c == 1) ? (int)*c : -1;
}

// Partial sums over strided reads (a GEMM's W(k, n): rows 2 KB apart) fight over the same cache
// sets; the default schedule vectorizes a row only where its reads are contiguous.
bool reads_contiguously(const Expr &body, const VarPtr &k) {
    bool ok = true;
    visit_exprs(body, [&](const Expr &x) {
        if (const Access *a = x.as<Access>()) {
            for (size_t i = 0; i < a->indices.size(); i++) {
                int st = step_of(a->indices[i], k);
                ok = ok && (st == 0 || (st == 1 && i + 1 == a->indices.size()));
            }
            for (const StorageTransform &t : store_target(*a->tensor).storage_transforms)
                ok = ok && (t.kind == StorageTransform::Kind::Fuse || !uses_var(x, k.get()));
        } else if (const Load *l = x.as<Load>()) {
            ok = ok && step_of(l->index, k) >= 0;
        }
    });
    return ok;
}

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

constexpr int kPartials = 8;
constexpr int kMaxPartialBodyNodes = 48;

/** Whether `red` runs with partial accumulators: floats, an extent that is not a constant below
 * 2 * kPartials, a body of at most kMaxPartialBodyNodes nodes with no reduction inside, whose
 * reads are contiguous in the reduction's dim. */
bool use_partials(const Reduce *red) {
    if (!red->type.is_float() || find_reduce(red->body).defined()) return false;
    if (const int64_t *e = as_const_int(red->extent); e && *e < 2 * kPartials) return false;
    if (!reads_contiguously(red->body, red->var)) return false;
    struct Counter : IRVisitor {
        int n = 0;
        void visit(const Expr &x) override {
            n++;
            IRVisitor::visit(x);
        }
        using IRVisitor::visit;
    } c;
    c.visit(red->body);
    return c.n <= kMaxPartialBodyNodes;
}

/** `acc = identity; <partial loops>` around `rest`, which reads the finished reduction in acc. */
Stmt partial_accumulators(const Reduce *red, const VarPtr &acc, const Stmt &rest) {
    std::vector<VarPtr> part;
    for (int j = 0; j < kPartials; j++)
        part.push_back(make_var("acc_" + red->var->name + "_p" + std::to_string(j), VarRole::Local, red->type));
    VarPtr ko = make_var(red->var->name + "_o", VarRole::Index, Int64);
    Expr k = var_expr(red->var), blocks = Div::make(red->extent, IntImm::make(kPartials));
    std::vector<Stmt> lanes;
    for (int j = 0; j < kPartials; j++) {
        Expr kj = Add::make(Mul::make(var_expr(ko), IntImm::make(kPartials)), IntImm::make(j));
        lanes.push_back(Assign::make(
            part[j], reduce_combine(red->op, var_expr(part[j]), substitute(red->body, red->var.get(), kj))));
    }
    Expr done = Mul::make(blocks, IntImm::make(kPartials));
    std::vector<Stmt> steps{For::make(ko, IntImm::make(0), blocks, ForKind::Serial, Block::make(lanes)),
                            For::make(red->var, done, Sub::make(red->extent, done), ForKind::Serial,
                                      Assign::make(part[0], reduce_combine(red->op, var_expr(part[0]), red->body)))};
    std::vector<Expr> sums;
    for (const VarPtr &p : part)
        sums.push_back(var_expr(p));
    for (size_t width = sums.size(); width > 1; width /= 2) // pairwise: (p0 + p1) + (p2 + p3) ...
        for (size_t j = 0; j < width / 2; j++)
            sums[j] = reduce_combine(red->op, sums[2 * j], sums[2 * j + 1]);
    steps.push_back(LocalVar::make(acc, sums[0], rest));
    Stmt s = Block::make(steps);
    for (int j = kPartials - 1; j >= 0; j--)
        s = LocalVar::make(part[j], reduce_identity(red->op, red->type), s);
    return s;
}

Stmt lower_value(const Expr &value, const std::function<Stmt(const Expr &)> &consume) {
    Expr r = find_reduce(value);
    if (!r.defined()) return consume(value);
    const Reduce *red = r.as<Reduce>();
    VarPtr acc = make_var("acc_" + red->var->name, VarRole::Local, red->type);
    Expr acc_e = var_expr(acc);
    Stmt rest = lower_value(replace_node(value, r, acc_e), consume);
    if (use_partials(red)) return partial_accumulators(red, acc, rest);
    Stmt loop_body =
        lower_value(red->body, [&](const Expr &b) { return Assign::make(acc, reduce_combine(red->op, acc_e, b)); });
    Stmt loop = For::make(red->var, IntImm::make(0), red->extent, ForKind::Serial, loop_body);
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
