/** \file Pass: hoist loop-invariant reads of aux arrays, length arrays and intermediates out of loops.
 *
 * Does: for each loop (innermost first), a read of a prelude aux array, a length array or (on the
 * host target) an intermediate the kernel allocates, that the loop body performs on every
 * iteration (not under an if, a select branch, the right side of && / ||, or a nested loop's
 * body), whose index uses nothing bound inside the loop and whose array the loop does not write,
 * becomes a let in front of the loop; equal reads share one let. Repeated, a row's prefix-sum
 * read moves out of every loop that does not change the row. No read is made outside its
 * array: the let reads unconditionally when the prover shows the index in range for every
 * iteration of the loops around the let (or the loop surely runs); otherwise it is
 * select(extent > 0, read, 0), read only when the loop runs (C's ?: is lazy).
 * Why intermediates: a row's max or sum read by the loop over the row (a softmax computed at its
 * row) is invariant there, but the C compiler cannot move it out itself, since the loop's stores
 * might alias it (restrict on a local pointer is not honoured), and then it does not vectorize the
 * loop. Aux and length arrays are not written by a kernel's computation; a kernel that builds its
 * aux arrays itself (build_aux_in_kernel, AOT) writes them in their builds, and an intermediate is
 * written by its producer: an array stored to inside the loop is left alone there. Not on a GPU
 * target, where other threads write intermediates (shared tiles, global buffers) inside the same
 * loops between barriers.
 * Requires: materialized UFs (loads of argument arrays). Ensures: same results, fewer loads
 * in inner loops. Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/hoist_loads.cpp (the lowered IR and
 * results). */
#include <map>
#include <set>

#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

/** The reads a loop body makes on every iteration whose index is invariant in the loop. */
class InvariantReads {
public:
    InvariantReads(const std::set<const VarNode *> &arrays, const VarNode *loop_var) : arrays_(arrays) {
        bound_.insert(loop_var);
    }
    std::vector<Expr> found;

    void stmt(const Stmt &s) {
        if (!s.defined()) return;
        if (const Block *b = s.as<Block>()) {
            for (const Stmt &x : b->stmts)
                stmt(x);
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            expr(l->value);
            bound_.insert(l->var.get());
            stmt(l->body);
        } else if (const LocalVar *l = s.as<LocalVar>()) {
            expr(l->init);
            bound_.insert(l->var.get());
            stmt(l->body);
        } else if (const For *f = s.as<For>()) {
            expr(f->min); // the body runs only when the extent is positive: not every iteration
            expr(f->extent);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            expr(i->cond);
        } else if (const Store *st = s.as<Store>()) {
            expr(st->index);
            expr(st->value);
        } else if (const Assign *a = s.as<Assign>()) {
            expr(a->value);
        } else if (const Allocate *a = s.as<Allocate>()) {
            expr(a->size);
            stmt(a->body);
        }
        // Assert: argument checks stay exactly as written.
    }

private:
    void expr(const Expr &e) {
        if (!e.defined()) return;
        if (const Load *l = e.as<Load>(); l && invariant(e)) {
            for (const Expr &f : found)
                if (equal(f, e)) return;
            found.push_back(e);
            return;
        }
        if (const Select *s = e.as<Select>()) return expr(s->cond);
        if (const And *a = e.as<And>()) return expr(a->a);
        if (const Or *o = e.as<Or>()) return expr(o->a);
        for_each_child(e, [&](const Expr &x) { expr(x); });
    }

    /** A read of an array of `arrays_` whose index reads only such arrays and uses no variable
     * bound inside the loop. */
    bool invariant(const Expr &e) {
        bool ok = true;
        visit_exprs(e, [&](const Expr &x) {
            if (const Load *l = x.as<Load>()) ok = ok && arrays_.count(l->buffer.get());
            if (const VarNode *v = x.as<VarNode>()) ok = ok && !bound_.count(v);
        });
        return ok;
    }

    const std::set<const VarNode *> &arrays_;
    std::set<const VarNode *> bound_;
};

class ReplaceReads : public IRMutator {
public:
    std::vector<std::pair<Expr, VarPtr>> reads;

protected:
    Expr mutate_node(const Load *op, const Expr &self) override {
        for (auto &[read, var] : reads)
            if (equal(read, self)) return var_expr(var);
        return IRMutator::mutate_node(op, self);
    }
    /** A let of a read hoisted from an inner loop now copies an outer let: drop the copy. */
    Stmt mutate_node(const LetStmt *op, const Stmt &self) override {
        Expr value = mutate(op->value);
        if (value.as<VarNode>() && !value.same_as(op->value))
            return mutate(substitute(op->body, {{op->var.get(), value}}));
        return IRMutator::mutate_node(op, self);
    }
};

class Hoister : public IRMutator {
public:
    Hoister(const LoweringContext &ctx, std::map<const VarNode *, Expr> counts)
        : ctx_(ctx), counts_(std::move(counts)) {
        for (auto &[buffer, count] : counts_)
            arrays_.insert(buffer);
    }

protected:
    /** An intermediate of the host target joins the hoistable arrays inside its allocation. */
    Stmt mutate_node(const Allocate *op, const Stmt &self) override {
        if (ctx_.target != Target::Host || op->memory == MemoryType::GpuShared) return IRMutator::mutate_node(op, self);
        const VarNode *buffer = op->buffer.get();
        counts_[buffer] = op->size;
        arrays_.insert(buffer);
        Stmt s = IRMutator::mutate_node(op, self);
        arrays_.erase(buffer);
        counts_.erase(buffer);
        return s;
    }

    Stmt mutate_node(const For *op, const Stmt &self) override {
        scope_.push_back(ScopeEntry{op->var.get(), op->min, op->extent});
        Stmt body = mutate(op->body);
        scope_.pop_back();
        // Arrays the loop writes (an in-kernel build filling its own array) are not invariant.
        std::set<const VarNode *> unwritten = arrays_;
        struct Stores : IRVisitor {
            std::set<const VarNode *> *arrays;
            using IRVisitor::visit_node;
            void visit_node(const Store *st) override {
                arrays->erase(st->buffer.get());
                IRVisitor::visit_node(st);
            }
        } stores;
        stores.arrays = &unwritten;
        stores.visit(body);
        InvariantReads reads(unwritten, op->var.get());
        reads.stmt(body);
        if (reads.found.empty()) return body.same_as(op->body) ? self : op->with([&](For &f) { f.body = body; });
        ReplaceReads replace;
        for (const Expr &r : reads.found)
            replace.reads.emplace_back(r, make_var(r.as<Load>()->buffer->name + "_h", VarRole::Local, r.type()));
        Stmt loop = op->with([&](For &f) { f.body = replace.mutate(body); });
        const int64_t *trips = as_const_int(op->extent);
        for (auto it = replace.reads.rbegin(); it != replace.reads.rend(); ++it) {
            Expr value = it->first;
            if ((!trips || *trips <= 0) && !in_range(*value.as<Load>()))
                value = Select::make(LT::make(IntImm::make(0), op->extent), value, make_zero(value.type()));
            loop = LetStmt::make(it->second, value, loop);
        }
        return loop;
    }

private:
    /** The read's index is inside its array for every iteration of the enclosing loops. */
    bool in_range(const Load &l) {
        Expr count = counts_.at(l.buffer.get());
        return ctx_.prover->prove_nonneg(l.index, scope_) &&
               ctx_.prover->prove_nonneg(Sub::make(Sub::make(count, l.index), IntImm::make(1)), scope_);
    }
    const LoweringContext &ctx_;
    std::map<const VarNode *, Expr> counts_; ///< aux, length and in-scope intermediate arrays: their element counts
    std::set<const VarNode *> arrays_;
    Scope scope_;
};

} // namespace

Stmt hoist_loads(const Stmt &s, const std::vector<ModuleArg> &args, const LoweringContext &ctx) {
    std::map<const VarNode *, Expr> counts;
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::AuxArray || a.kind == ModuleArg::Kind::LengthArray)
            counts[a.var.get()] = a.expected_count;
    return Hoister(ctx, std::move(counts)).mutate(s);
}

} // namespace cora::ir
