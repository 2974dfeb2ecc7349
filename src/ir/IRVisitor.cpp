#include "ir/IRVisitor.h"

#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

// --- IRVisitor ---------------------------------------------------------------------------------

void IRVisitor::visit(const Expr &e) {
    if (!e.defined()) return;
    switch (e.get()->kind) {
#define CORA_DISPATCH(N)                                                                                               \
    case NodeKind::N: visit_node(static_cast<const N *>(e.get())); return;
        CORA_EXPR_NODES(CORA_DISPATCH)
#undef CORA_DISPATCH
    default: CORA_CHECK(false, "statement kind in an expression");
    }
}
void IRVisitor::visit(const Stmt &s) {
    if (!s.defined()) return;
    switch (s.get()->kind) {
#define CORA_DISPATCH(N)                                                                                               \
    case NodeKind::N: visit_node(static_cast<const N *>(s.get())); return;
        CORA_STMT_NODES(CORA_DISPATCH)
#undef CORA_DISPATCH
    default: CORA_CHECK(false, "expression kind in a statement");
    }
}

void IRVisitor::visit_node(const IntImm *) {}
void IRVisitor::visit_node(const FloatImm *) {}
void IRVisitor::visit_node(const Var *) {}
#define CORA_VISIT_BIN(N)                                                                                              \
    void IRVisitor::visit_node(const N *op) {                                                                          \
        visit(op->a);                                                                                                  \
        visit(op->b);                                                                                                  \
    }
CORA_VISIT_BIN(Add)
CORA_VISIT_BIN(Sub)
CORA_VISIT_BIN(Mul)
CORA_VISIT_BIN(Div)
CORA_VISIT_BIN(Mod)
CORA_VISIT_BIN(Min)
CORA_VISIT_BIN(Max)
CORA_VISIT_BIN(EQ)
CORA_VISIT_BIN(NE)
CORA_VISIT_BIN(LT) CORA_VISIT_BIN(LE) CORA_VISIT_BIN(GT) CORA_VISIT_BIN(GE) CORA_VISIT_BIN(And) CORA_VISIT_BIN(Or)
#undef CORA_VISIT_BIN
    void IRVisitor::visit_node(const Not *op) {
    visit(op->a);
}
void IRVisitor::visit_node(const Select *op) {
    visit(op->cond);
    visit(op->t);
    visit(op->f);
}
void IRVisitor::visit_node(const Cast *op) { visit(op->value); }
void IRVisitor::visit_node(const Call *op) {
    for (const Expr &a : op->args)
        visit(a);
}
void IRVisitor::visit_node(const UFCall *op) {
    for (const Expr &a : op->args)
        visit(a);
}
void IRVisitor::visit_node(const Access *op) {
    for (const Expr &a : op->indices)
        visit(a);
}
void IRVisitor::visit_node(const Load *op) { visit(op->index); }
void IRVisitor::visit_node(const Reduce *op) {
    visit(op->extent);
    visit(op->body);
}
void IRVisitor::visit_node(const For *op) {
    visit(op->min);
    visit(op->extent);
    visit(op->body);
}
void IRVisitor::visit_node(const Provide *op) {
    for (const Expr &a : op->indices)
        visit(a);
    visit(op->value);
}
void IRVisitor::visit_node(const Store *op) {
    visit(op->index);
    visit(op->value);
}
void IRVisitor::visit_node(const Block *op) {
    for (const Stmt &s : op->stmts)
        visit(s);
}
void IRVisitor::visit_node(const IfThenElse *op) {
    visit(op->cond);
    visit(op->then_case);
    visit(op->else_case);
}
void IRVisitor::visit_node(const LetStmt *op) {
    visit(op->value);
    visit(op->body);
}
void IRVisitor::visit_node(const LocalVar *op) {
    visit(op->init);
    visit(op->body);
}
void IRVisitor::visit_node(const Assign *op) { visit(op->value); }
void IRVisitor::visit_node(const Allocate *op) {
    visit(op->size);
    visit(op->body);
}
void IRVisitor::visit_node(const Assert *op) {
    visit(op->cond);
    for (const Expr &v : op->values)
        visit(v);
}
void IRVisitor::visit_node(const LaunchKernel *op) {
    for (const Expr &e : op->grid)
        visit(e);
    for (const Expr &e : op->threads)
        visit(e);
    for (const Expr &e : op->narrow.bounds)
        visit(e);
}

// --- IRMutator ---------------------------------------------------------------------------------

Expr IRMutator::mutate(const Expr &e) {
    if (!e.defined()) return e;
    switch (e.get()->kind) {
#define CORA_DISPATCH(N)                                                                                               \
    case NodeKind::N: return mutate_node(static_cast<const N *>(e.get()), e);
        CORA_EXPR_NODES(CORA_DISPATCH)
#undef CORA_DISPATCH
    default: CORA_CHECK(false, "statement kind in an expression"); return e;
    }
}
Stmt IRMutator::mutate(const Stmt &s) {
    if (!s.defined()) return s;
    switch (s.get()->kind) {
#define CORA_DISPATCH(N)                                                                                               \
    case NodeKind::N: return mutate_node(static_cast<const N *>(s.get()), s);
        CORA_STMT_NODES(CORA_DISPATCH)
#undef CORA_DISPATCH
    default: CORA_CHECK(false, "expression kind in a statement"); return s;
    }
}

std::vector<Expr> IRMutator::mutate_all(const std::vector<Expr> &v, bool &changed) {
    std::vector<Expr> out;
    out.reserve(v.size());
    for (const Expr &e : v) {
        out.push_back(mutate(e));
        if (!out.back().same_as(e)) changed = true;
    }
    return out;
}

Expr IRMutator::mutate_node(const IntImm *, const Expr &self) { return self; }
Expr IRMutator::mutate_node(const FloatImm *, const Expr &self) { return self; }
Expr IRMutator::mutate_node(const Var *, const Expr &self) { return self; }
#define CORA_MUTATE_BIN(N)                                                                                             \
    Expr IRMutator::mutate_node(const N *op, const Expr &self) {                                                       \
        Expr a = mutate(op->a), b = mutate(op->b);                                                                     \
        if (a.same_as(op->a) && b.same_as(op->b)) return self;                                                         \
        return N::make(a, b);                                                                                          \
    }
CORA_MUTATE_BIN(Add)
CORA_MUTATE_BIN(Sub)
CORA_MUTATE_BIN(Mul)
CORA_MUTATE_BIN(Div)
CORA_MUTATE_BIN(Mod)
CORA_MUTATE_BIN(Min)
CORA_MUTATE_BIN(Max)
CORA_MUTATE_BIN(EQ)
CORA_MUTATE_BIN(NE)
CORA_MUTATE_BIN(LT) CORA_MUTATE_BIN(LE) CORA_MUTATE_BIN(GT) CORA_MUTATE_BIN(GE) CORA_MUTATE_BIN(And) CORA_MUTATE_BIN(Or)
#undef CORA_MUTATE_BIN
    Expr IRMutator::mutate_node(const Not *op, const Expr &self) {
    Expr a = mutate(op->a);
    return a.same_as(op->a) ? self : Not::make(a);
}
Expr IRMutator::mutate_node(const Select *op, const Expr &self) {
    Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
    if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return self;
    return Select::make(c, t, f);
}
Expr IRMutator::mutate_node(const Cast *op, const Expr &self) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? self : Cast::make(op->type, v);
}
Expr IRMutator::mutate_node(const Call *op, const Expr &self) {
    bool changed = false;
    auto args = mutate_all(op->args, changed);
    return changed ? Call::make(op->type, op->name, args) : self;
}
Expr IRMutator::mutate_node(const UFCall *op, const Expr &self) {
    bool changed = false;
    auto args = mutate_all(op->args, changed);
    return changed ? UFCall::make(op->fn, args) : self;
}
Expr IRMutator::mutate_node(const Access *op, const Expr &self) {
    bool changed = false;
    auto idx = mutate_all(op->indices, changed);
    return changed ? Access::make(op->tensor, idx) : self;
}
Expr IRMutator::mutate_node(const Load *op, const Expr &self) {
    Expr i = mutate(op->index);
    return i.same_as(op->index) ? self : Load::make(op->buffer, i);
}
Expr IRMutator::mutate_node(const Reduce *op, const Expr &self) {
    Expr e = mutate(op->extent), b = mutate(op->body);
    if (e.same_as(op->extent) && b.same_as(op->body)) return self;
    return Reduce::make(op->op, op->var, e, b);
}

Stmt IRMutator::mutate_node(const For *op, const Stmt &self) {
    Expr m = mutate(op->min), e = mutate(op->extent);
    Stmt b = mutate(op->body);
    if (m.same_as(op->min) && e.same_as(op->extent) && b.same_as(op->body)) return self;
    return op->with([&](For &f) {
        f.min = m;
        f.extent = e;
        f.body = b;
    });
}
Stmt IRMutator::mutate_node(const Provide *op, const Stmt &self) {
    bool changed = false;
    auto idx = mutate_all(op->indices, changed);
    Expr v = mutate(op->value);
    if (!changed && v.same_as(op->value)) return self;
    return Provide::make(op->tensor, idx, v);
}
Stmt IRMutator::mutate_node(const Store *op, const Stmt &self) {
    Expr i = mutate(op->index), v = mutate(op->value);
    if (i.same_as(op->index) && v.same_as(op->value)) return self;
    return Store::make(op->buffer, i, v);
}
Stmt IRMutator::mutate_node(const Block *op, const Stmt &self) {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt &s : op->stmts) {
        out.push_back(mutate(s));
        if (!out.back().same_as(s)) changed = true;
    }
    return changed ? Block::make(out) : self;
}
Stmt IRMutator::mutate_node(const IfThenElse *op, const Stmt &self) {
    Expr c = mutate(op->cond);
    Stmt t = mutate(op->then_case), e = mutate(op->else_case);
    if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
    return IfThenElse::make(c, t, e);
}
Stmt IRMutator::mutate_node(const LetStmt *op, const Stmt &self) {
    Expr v = mutate(op->value);
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return self;
    return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::mutate_node(const LocalVar *op, const Stmt &self) {
    Expr i = mutate(op->init);
    Stmt b = mutate(op->body);
    if (i.same_as(op->init) && b.same_as(op->body)) return self;
    return LocalVar::make(op->var, i, b);
}
Stmt IRMutator::mutate_node(const Assign *op, const Stmt &self) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? self : Assign::make(op->var, v);
}
Stmt IRMutator::mutate_node(const Allocate *op, const Stmt &self) {
    Expr sz = mutate(op->size);
    Stmt b = mutate(op->body);
    if (sz.same_as(op->size) && b.same_as(op->body)) return self;
    return Allocate::make(op->buffer, sz, b, op->memory);
}
Stmt IRMutator::mutate_node(const Assert *op, const Stmt &self) {
    Expr c = mutate(op->cond);
    bool changed = !c.same_as(op->cond);
    auto vals = mutate_all(op->values, changed);
    return changed ? Assert::make(c, op->text, vals) : self;
}
Stmt IRMutator::mutate_node(const LaunchKernel *op, const Stmt &self) {
    bool changed = false;
    auto grid = mutate_all(op->grid, changed);
    auto threads = mutate_all(op->threads, changed);
    NarrowLaunch narrow = op->narrow;
    narrow.bounds = mutate_all(op->narrow.bounds, changed);
    return changed ? LaunchKernel::make(op->kernel, grid, threads, op->args, narrow) : self;
}

// --- helpers -----------------------------------------------------------------------------------

namespace {
class StmtWalker : public IRVisitor {
public:
    explicit StmtWalker(const std::function<void(const Stmt &)> &f) : f_(f) {}
    using IRVisitor::visit;
    void visit(const Stmt &s) override {
        if (!s.defined()) return;
        f_(s);
        IRVisitor::visit(s);
    }
    void visit(const Expr &) override {}

private:
    const std::function<void(const Stmt &)> &f_;
};
} // namespace

void visit_stmts(const Stmt &s, const std::function<void(const Stmt &)> &f) {
    StmtWalker w(f);
    w.visit(s);
}

namespace {
class ExprWalker : public IRVisitor {
public:
    explicit ExprWalker(const std::function<void(const Expr &)> &f) : f_(f) {}
    void visit(const Expr &e) override {
        if (!e.defined()) return;
        f_(e);
        IRVisitor::visit(e);
    }
    using IRVisitor::visit;

private:
    const std::function<void(const Expr &)> &f_;
};

class Substituter : public IRMutator {
public:
    explicit Substituter(const std::map<const VarNode *, Expr> &m) : m_(m) {}

protected:
    Expr mutate_node(const Var *op, const Expr &self) override {
        auto it = m_.find(op);
        return it == m_.end() ? self : it->second;
    }

private:
    const std::map<const VarNode *, Expr> &m_;
};
} // namespace

void visit_exprs(const Expr &e, const std::function<void(const Expr &)> &f) {
    ExprWalker w(f);
    w.visit(e);
}
void visit_exprs(const Stmt &s, const std::function<void(const Expr &)> &f) {
    ExprWalker w(f);
    w.visit(s);
}

void for_each_child(const Expr &e, const std::function<void(const Expr &)> &f) {
    struct Children : IRVisitor {
        const std::function<void(const Expr &)> *f;
        bool top = true;
        void visit(const Expr &x) override {
            if (!top) return (*f)(x);
            top = false;
            IRVisitor::visit(x);
        }
        using IRVisitor::visit;
    } ch;
    ch.f = &f;
    ch.visit(e);
}

Expr substitute(const Expr &e, const std::map<const VarNode *, Expr> &m) {
    if (m.empty()) return e;
    Substituter s(m);
    return s.mutate(e);
}
Stmt substitute(const Stmt &st, const std::map<const VarNode *, Expr> &m) {
    if (m.empty()) return st;
    Substituter s(m);
    return s.mutate(st);
}
Expr substitute(const Expr &e, const VarNode *v, const Expr &value) {
    std::map<const VarNode *, Expr> m{{v, value}};
    return substitute(e, m);
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

bool uses_var(const Expr &e, const VarNode *v) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) {
        if (x.get() == v) found = true;
    });
    return found;
}

std::set<const VarNode *> vars_of(const Expr &e, VarRole role) {
    std::set<const VarNode *> out;
    visit_exprs(e, [&](const Expr &x) {
        if (const VarNode *v = x.as<VarNode>()) {
            if (v->role == role) out.insert(v);
        }
    });
    return out;
}

} // namespace cora::ir
