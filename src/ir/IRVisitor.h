/** \file Traversal of the IR: IRVisitor walks, IRMutator rebuilds (returning the same node
 * when nothing changed), plus the common substitutions and queries built on them. */
#pragma once

#include <functional>
#include <map>
#include <set>

#include "ir/IR.h"

namespace cora::ir {

class IRVisitor {
public:
    virtual ~IRVisitor() = default;
    virtual void visit(const Expr &e);
    virtual void visit(const Stmt &s);

protected:
#define CORA_VISIT_DECL(N) virtual void visit_node(const N *op);
    CORA_EXPR_NODES(CORA_VISIT_DECL)
    CORA_STMT_NODES(CORA_VISIT_DECL)
#undef CORA_VISIT_DECL
};

class IRMutator {
public:
    virtual ~IRMutator() = default;
    virtual Expr mutate(const Expr &e);
    virtual Stmt mutate(const Stmt &s);

protected:
#define CORA_MUTATE_DECL(N) virtual Expr mutate_node(const N *op, const Expr &self);
    CORA_EXPR_NODES(CORA_MUTATE_DECL)
#undef CORA_MUTATE_DECL
#define CORA_MUTATE_DECL(N) virtual Stmt mutate_node(const N *op, const Stmt &self);
    CORA_STMT_NODES(CORA_MUTATE_DECL)
#undef CORA_MUTATE_DECL
    std::vector<Expr> mutate_all(const std::vector<Expr> &v, bool &changed);
};

/** Calls `f` on every expression node, pre-order (statements are descended into). */
void visit_exprs(const Expr &e, const std::function<void(const Expr &)> &f);
void visit_exprs(const Stmt &s, const std::function<void(const Expr &)> &f);
/** Calls `f` on every statement of `s`, pre-order (expressions are not descended into). */
void visit_stmts(const Stmt &s, const std::function<void(const Stmt &)> &f);
/** Calls `f` on each direct child expression of `e` (not on `e`, not deeper). */
void for_each_child(const Expr &e, const std::function<void(const Expr &)> &f);

/** Replace variables (by node identity). */
Expr substitute(const Expr &e, const std::map<const VarNode *, Expr> &m);
Stmt substitute(const Stmt &s, const std::map<const VarNode *, Expr> &m);
Expr substitute(const Expr &e, const VarNode *v, const Expr &value);
/** `e` with every occurrence of the node `target` (by identity, not structure) replaced by `with`. */
Expr replace_node(const Expr &e, const Expr &target, const Expr &with);

/** Does `e` mention `v` anywhere (including inside UF arguments)? */
bool uses_var(const Expr &e, const VarNode *v);
/** All variables of the given role mentioned in `e`. */
std::set<const VarNode *> vars_of(const Expr &e, VarRole role);

/** Structural equality: same node kinds, types, constants and symbol identities. */
bool equal(const Expr &a, const Expr &b);
bool equal(const Stmt &a, const Stmt &b);

} // namespace cora::ir
