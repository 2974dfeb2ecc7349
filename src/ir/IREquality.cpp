/** \file Structural equality of IR trees (symbols compare by identity). */
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"

namespace cora::ir {

namespace {
bool equal_all(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (!equal(a[i], b[i])) return false;
    return true;
}
} // namespace

bool equal(const Expr &a, const Expr &b) {
    if (a.same_as(b)) return true;
    if (!a.defined() || !b.defined()) return false;
    if (a.get()->kind != b.get()->kind || a.type() != b.type()) return false;
    switch (a.get()->kind) {
    case NodeKind::IntImm: return a.as<IntImm>()->value == b.as<IntImm>()->value;
    case NodeKind::FloatImm: return a.as<FloatImm>()->value == b.as<FloatImm>()->value;
    case NodeKind::Var: return a.get() == b.get();
#define CORA_EQ_BIN(N)                                                                                                 \
    case NodeKind::N: return equal(a.as<N>()->a, b.as<N>()->a) && equal(a.as<N>()->b, b.as<N>()->b);
        CORA_EQ_BIN(Add)
        CORA_EQ_BIN(Sub)
        CORA_EQ_BIN(Mul)
        CORA_EQ_BIN(Div)
        CORA_EQ_BIN(Mod)
        CORA_EQ_BIN(Min)
        CORA_EQ_BIN(Max) CORA_EQ_BIN(EQ) CORA_EQ_BIN(NE) CORA_EQ_BIN(LT) CORA_EQ_BIN(LE) CORA_EQ_BIN(GT) CORA_EQ_BIN(GE)
            CORA_EQ_BIN(And) CORA_EQ_BIN(Or)
#undef CORA_EQ_BIN
                case NodeKind::Not : return equal(a.as<Not>()->a, b.as<Not>()->a);
    case NodeKind::Select: {
        auto x = a.as<Select>(), y = b.as<Select>();
        return equal(x->cond, y->cond) && equal(x->t, y->t) && equal(x->f, y->f);
    }
    case NodeKind::Cast: return equal(a.as<Cast>()->value, b.as<Cast>()->value);
    case NodeKind::Call:
        return a.as<Call>()->name == b.as<Call>()->name && equal_all(a.as<Call>()->args, b.as<Call>()->args);
    case NodeKind::UFCall:
        return a.as<UFCall>()->fn == b.as<UFCall>()->fn && equal_all(a.as<UFCall>()->args, b.as<UFCall>()->args);
    case NodeKind::Access:
        return a.as<Access>()->tensor == b.as<Access>()->tensor &&
               equal_all(a.as<Access>()->indices, b.as<Access>()->indices);
    case NodeKind::Load:
        return a.as<Load>()->buffer == b.as<Load>()->buffer && equal(a.as<Load>()->index, b.as<Load>()->index);
    case NodeKind::Reduce: {
        auto x = a.as<Reduce>(), y = b.as<Reduce>();
        return x->op == y->op && x->var == y->var && equal(x->extent, y->extent) && equal(x->body, y->body);
    }
    default: return false;
    }
}

bool equal(const Stmt &a, const Stmt &b) {
    if (a.same_as(b)) return true;
    if (!a.defined() || !b.defined()) return false;
    if (a.get()->kind != b.get()->kind) return false;
    switch (a.get()->kind) {
    case NodeKind::For: {
        auto x = a.as<For>(), y = b.as<For>();
        return x->var == y->var && x->for_kind == y->for_kind && x->work_split == y->work_split &&
               x->pipeline_stages == y->pipeline_stages &&
               equal(x->min, y->min) && equal(x->extent, y->extent) && equal(x->body, y->body);
    }
    case NodeKind::Provide: {
        auto x = a.as<Provide>(), y = b.as<Provide>();
        return x->tensor == y->tensor && equal_all(x->indices, y->indices) && equal(x->value, y->value);
    }
    case NodeKind::Store: {
        auto x = a.as<Store>(), y = b.as<Store>();
        return x->buffer == y->buffer && equal(x->index, y->index) && equal(x->value, y->value);
    }
    case NodeKind::Block: {
        auto x = a.as<Block>(), y = b.as<Block>();
        if (x->stmts.size() != y->stmts.size()) return false;
        for (size_t i = 0; i < x->stmts.size(); i++)
            if (!equal(x->stmts[i], y->stmts[i])) return false;
        return true;
    }
    case NodeKind::IfThenElse: {
        auto x = a.as<IfThenElse>(), y = b.as<IfThenElse>();
        return equal(x->cond, y->cond) && equal(x->then_case, y->then_case) && equal(x->else_case, y->else_case);
    }
    case NodeKind::LetStmt: {
        auto x = a.as<LetStmt>(), y = b.as<LetStmt>();
        return x->var == y->var && equal(x->value, y->value) && equal(x->body, y->body);
    }
    case NodeKind::LocalVar: {
        auto x = a.as<LocalVar>(), y = b.as<LocalVar>();
        return x->var == y->var && equal(x->init, y->init) && equal(x->body, y->body);
    }
    case NodeKind::Assign:
        return a.as<Assign>()->var == b.as<Assign>()->var && equal(a.as<Assign>()->value, b.as<Assign>()->value);
    case NodeKind::Allocate: {
        auto x = a.as<Allocate>(), y = b.as<Allocate>();
        return x->buffer == y->buffer && x->memory == y->memory && equal(x->size, y->size) && equal(x->body, y->body);
    }
    case NodeKind::Assert: {
        auto x = a.as<Assert>(), y = b.as<Assert>();
        return x->text == y->text && equal(x->cond, y->cond) && equal_all(x->values, y->values);
    }
    case NodeKind::LaunchKernel: {
        auto x = a.as<LaunchKernel>(), y = b.as<LaunchKernel>();
        auto same_arrays = [](const NarrowLaunch &p, const NarrowLaunch &q) {
            if (p.arrays.size() != q.arrays.size()) return false;
            for (size_t i = 0; i < p.arrays.size(); i++)
                if (p.arrays[i].magnitude != q.arrays[i].magnitude || p.arrays[i].array != q.arrays[i].array)
                    return false;
            return true;
        };
        return x->kernel == y->kernel && x->args == y->args && equal_all(x->grid, y->grid) &&
               equal_all(x->threads, y->threads) && x->narrow.kernel32 == y->narrow.kernel32 &&
               equal_all(x->narrow.bounds, y->narrow.bounds) && same_arrays(x->narrow, y->narrow);
    }
    default: return false;
    }
}

} // namespace cora::ir
