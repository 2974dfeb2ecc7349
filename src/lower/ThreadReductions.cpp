/** \file Pass: cross-thread reductions (GPU targets).
 *
 * Why. A row reduction (softmax's max and sum, LayerNorm's mean) has one output per row and a
 * long reduction; a block per row with a thread per element is the GPU's way, so a reduction loop
 * may be bound to threads (`split(r, ro, ri, 32).reorder({..., ri, ro}).gpu_threads(ri)`). Bound
 * as it is, every thread would update the same element: a race, and a store outside the thread
 * loops (the init, the epilogue) that every thread would run.
 *
 * Does: in a kernel, where a block-level statement list holds
 *     X[I] = init;  gpu_threads for t in [m, m + T): { ... X[I] = op(X[I], v) ... };  X[I] = e(X[I]) ...
 * (the reduction of one element X[I], I independent of the thread loop; op one of + * max min;
 * the epilogue stores optional), it becomes
 *     allocate in shared memory X_part[T]
 *     gpu_threads for t: { allocate X_acc[1]; X_acc[0] = init; ...X_acc[0] = op(X_acc[0], v)...;
 *                          X_part[t - m] = X_acc[0] }
 *     gpu_lanes for lane in [0, 1): { X[I] = init; for p in [0, T): X[I] = op(X[I], X_part[p]);
 *                                     X[I] = e(X[I]) ... }
 * Each thread reduces its part in a register; one thread combines the parts, between the two
 * barriers a gpu_lanes loop gets (so it sees every part, and every thread sees the result). The
 * combine is in the order of the threads, so the result is the same on every run.
 * Errors (CompileError naming the buffer and the loop): a thread loop that updates one element
 * from every thread without the reduction's init just before it (a thread-bound reduction loop
 * must be the reduction's outermost loop), with a thread count that is not a constant, with
 * another update or store in it, or with an update that is not op(X[I], v).
 * Requires: decide_loop_execution (final loop kinds); before split_host_device, whose checks see
 * the stores inside thread and lanes loops. On the host target it changes nothing.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/gpu_schedules.cpp ("cross-thread reductions"). */
#include <set>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Variables a statement defines (loop variables, lets, locals, allocations). */
std::set<const VarNode *> defined_in(const Stmt &s) {
    std::set<const VarNode *> d;
    visit_stmts(s, [&](const Stmt &x) {
        if (const For *f = x.as<For>()) d.insert(f->var.get());
        if (const LetStmt *l = x.as<LetStmt>()) d.insert(l->var.get());
        if (const LocalVar *l = x.as<LocalVar>()) d.insert(l->var.get());
        if (const Allocate *a = x.as<Allocate>()) d.insert(a->buffer.get());
    });
    return d;
}

bool uses_any(const Expr &e, const std::set<const VarNode *> &vars) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) {
        if (const VarNode *v = x.as<VarNode>()) found = found || vars.count(v);
    });
    return found;
}

/** The element every thread of `loop` updates: a store to memory outside the loop at an index
 * independent of it; nullptr when the loop has none (an ordinary thread loop). */
const Store *shared_target(const For *loop, const Stmt &self) {
    std::set<const VarNode *> inner = defined_in(self);
    const Store *target = nullptr;
    visit_stmts(loop->body, [&](const Stmt &x) {
        const Store *st = x.as<Store>();
        if (!st || target || inner.count(st->buffer.get())) return;
        if (!uses_any(st->index, inner)) target = st;
    });
    return target;
}

bool is_combiner(const Expr &e) { return e.as<Add>() || e.as<Mul>() || e.as<Max>() || e.as<Min>(); }

/** `e` with the operands of its top node replaced (a, b). */
Expr rebuild(const Expr &e, const Expr &a, const Expr &b) {
    if (e.as<Add>()) return Add::make(a, b);
    if (e.as<Mul>()) return Mul::make(a, b);
    if (e.as<Max>()) return Max::make(a, b);
    return Min::make(a, b);
}

std::pair<Expr, Expr> operands(const Expr &e) {
    if (const Add *n = e.as<Add>()) return {n->a, n->b};
    if (const Mul *n = e.as<Mul>()) return {n->a, n->b};
    if (const Max *n = e.as<Max>()) return {n->a, n->b};
    const Min *n = e.as<Min>();
    return {n->a, n->b};
}

class ThreadReductions : public IRMutator {
protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        if (is_gpu_thread(op->for_kind)) {
            if (const Store *t = shared_target(op, self)) not_outermost(t, op);
            // An ordinary thread loop. A reduction bound to threads inside it would need a barrier
            // inside a thread loop: not supported.
            visit_stmts(op->body, [&](const Stmt &x) {
                const For *inner = x.as<For>();
                if (!inner || !is_gpu_thread(inner->for_kind)) return;
                if (const Store *t = shared_target(inner, x))
                    throw_compile_error("the reduction into '", t->buffer->name, "' has loop '", inner->var->name,
                                        "' bound to threads inside thread loop '", op->var->name,
                                        "'; a reduction over threads needs the block's threads to itself: bind '",
                                        op->var->name, "' to blocks (or leave it serial)");
            });
            return self;
        }
        return IRMutator::mutate_node(op, self);
    }
    Stmt mutate_node(const Block *op, const Stmt &self) override {
        std::vector<Stmt> out;
        bool changed = false;
        std::vector<Stmt> s = sink_inits(op->stmts);
        for (size_t i = 0; i < s.size(); i++) {
            const For *loop = s[i].as<For>();
            const Store *target = loop && is_gpu_thread(loop->for_kind) ? shared_target(loop, s[i]) : nullptr;
            if (!target) {
                Stmt m = mutate(s[i]);
                changed = changed || !m.same_as(s[i]);
                out.push_back(m);
                continue;
            }
            const Stmt init_stmt = !out.empty() ? out.back() : Stmt();
            const Store *init = init_stmt.defined() ? init_stmt.as<Store>() : nullptr;
            if (!init || init->buffer.get() != target->buffer.get() || !equal(init->index, target->index))
                not_outermost(target, loop);
            size_t end = i + 1; // the epilogue: stores to the same element right after
            while (end < s.size()) {
                const Store *e = s[end].as<Store>();
                if (!e || e->buffer.get() != target->buffer.get() || !equal(e->index, target->index)) break;
                end++;
            }
            out.pop_back();
            out.push_back(rewrite(loop, init_stmt, std::vector<Stmt>(s.begin() + (long)i + 1, s.begin() + (long)end)));
            i = end - 1;
            changed = true;
        }
        return changed ? Block::make(out) : self;
    }

private:
    /** Whether `s` (under lets) is, or is a list holding, a thread loop that updates one element. */
    static bool holds_thread_reduction(const Stmt &s) {
        Stmt x = s;
        while (const LetStmt *l = x.as<LetStmt>())
            x = l->body;
        std::vector<Stmt> list = {x};
        if (const Block *b = x.as<Block>()) list = b->stmts;
        for (const Stmt &y : list)
            if (const For *f = y.as<For>())
                if (is_gpu_thread(f->for_kind) && shared_target(f, y)) return true;
        return false;
    }

    /** A reduction's init followed by lets (hoist_loads puts the loop's invariant reads between
     * them) moves into the lets' body, in front of the thread loop, and its epilogue after them
     * to the body's end: the lets read no result. */
    static std::vector<Stmt> sink_inits(std::vector<Stmt> s) {
        for (size_t i = 0; i + 1 < s.size(); i++) {
            const Store *init = s[i].as<Store>();
            const LetStmt *let = s[i + 1].as<LetStmt>();
            if (!init || !let || !holds_thread_reduction(s[i + 1])) continue;
            bool reads = false;
            visit_exprs(let->value, [&](const Expr &e) {
                if (const Load *l = e.as<Load>()) reads = reads || l->buffer.get() == init->buffer.get();
            });
            if (reads || uses_var(init->index, let->var.get()) || uses_var(init->value, let->var.get())) continue;
            std::vector<Stmt> body = {s[i]};
            if (const Block *b = let->body.as<Block>())
                body.insert(body.end(), b->stmts.begin(), b->stmts.end());
            else
                body.push_back(let->body);
            // The epilogue right after the lets goes in with them.
            size_t end = i + 2;
            for (; end < s.size(); end++) {
                const Store *e = s[end].as<Store>();
                if (!e || e->buffer.get() != init->buffer.get() || !equal(e->index, init->index)) break;
                body.push_back(s[end]);
            }
            Stmt moved = LetStmt::make(let->var, let->value, Block::make(body));
            s.erase(s.begin() + (long)i + 1, s.begin() + (long)end);
            s[i] = moved;
            i = i > 0 ? i - 1 : 0;
        }
        return s;
    }

    [[noreturn]] static void not_outermost(const Store *target, const For *loop) {
        throw_compile_error("the reduction into '", target->buffer->name, "' has loop '", loop->var->name,
                            "' bound to threads, but it is not the reduction's outermost loop (every thread would "
                            "update the same element); reorder it outside the reduction's other loops");
    }

    Stmt rewrite(const For *loop, const Stmt &init_stmt, const std::vector<Stmt> &epilogue) {
        const Store *init = init_stmt.as<Store>();
        const VarPtr &buf = init->buffer;
        const Expr target = Load::make(buf, init->index);
        const std::string what = "the reduction into '" + buf->name + "' over threads (loop '" + loop->var->name + "')";
        const int64_t *threads = as_const_int(loop->extent);
        if (!threads || *threads < 1)
            throw_compile_error(what, ": the loop's extent ", print(loop->extent),
                                " is not a constant; split the reduction dim and bind the inner loop of constant "
                                "extent to threads");
        // Parts are values (float32 for float16 storage): only the final result is rounded.
        VarPtr acc = make_var(buf->name + "_acc", VarRole::Buffer, buf->type.value_type());
        VarPtr part = make_var(buf->name + "_part", VarRole::Buffer, buf->type.value_type());
        const Expr acc0 = Load::make(acc, IntImm::make(0));
        // The thread's part: every update of X[I] becomes one of its accumulator.
        Expr combine;
        struct ToAccumulator : IRMutator {
            const VarNode *buf;
            Expr index, acc0;
            VarPtr acc;
            Expr *combine;
            std::string what;
            using IRMutator::mutate_node;
            Expr mutate_node(const Load *op, const Expr &self) override {
                if (op->buffer.get() == buf && equal(op->index, index)) return acc0;
                return IRMutator::mutate_node(op, self);
            }
            Stmt mutate_node(const Store *op, const Stmt &self) override {
                if (op->buffer.get() != buf) return IRMutator::mutate_node(op, self);
                if (!equal(op->index, index))
                    throw_compile_error(what, ": the loop also stores to '", buf->name,
                                        "' elsewhere; a thread-bound reduction computes one element");
                const Expr &v = op->value;
                bool ok = is_combiner(v);
                if (ok) {
                    auto [a, b] = operands(v);
                    auto is_target = [&](const Expr &x) {
                        const Load *l = x.as<Load>();
                        return l && l->buffer.get() == buf && equal(l->index, index);
                    };
                    ok = is_target(a) != is_target(b);
                    if (ok) {
                        const Expr &other = is_target(a) ? b : a;
                        if (combine->defined() && combine->get()->kind != v.get()->kind) ok = false;
                        if (!combine->defined()) *combine = v;
                        return Store::make(acc, IntImm::make(0), rebuild(v, acc0, mutate(other)));
                    }
                }
                throw_compile_error(what, ": its update ", print(v),
                                    " is not a sum, product, maximum or minimum of the element and a value");
            }
        } to_acc;
        to_acc.buf = buf.get();
        to_acc.index = init->index;
        to_acc.acc0 = acc0;
        to_acc.acc = acc;
        to_acc.combine = &combine;
        to_acc.what = what;
        Stmt body = to_acc.mutate(loop->body);
        const Expr slot = simplify(Sub::make(var_expr(loop->var), loop->min));
        Stmt thread_part = Allocate::make(
            acc, IntImm::make(1),
            Block::make({Store::make(acc, IntImm::make(0), init->value), body, Store::make(part, slot, acc0)}),
            MemoryType::Stack);
        Stmt threads_loop = For::make(loop->var, loop->min, loop->extent, loop->for_kind, thread_part);
        // One thread combines the parts in thread order, then applies the epilogue.
        VarPtr p = make_var("part", VarRole::Index);
        Stmt fold = For::make(p, IntImm::make(0), loop->extent, ForKind::Serial,
                              Store::make(buf, init->index, rebuild(combine, target, Load::make(part, var_expr(p)))));
        std::vector<Stmt> single = {init_stmt, fold};
        single.insert(single.end(), epilogue.begin(), epilogue.end());
        VarPtr lane = make_var("lane", VarRole::Index);
        Stmt combine_loop = For::make(lane, IntImm::make(0), IntImm::make(1), ForKind::GpuLanes, Block::make(single));
        return Allocate::make(part, loop->extent, Block::make({threads_loop, combine_loop}), MemoryType::GpuShared);
    }
};

} // namespace

Stmt lower_thread_reductions(const Stmt &s, Target target) {
    if (!is_gpu(target)) return s;
    return ThreadReductions().mutate(s);
}

} // namespace cora::ir
