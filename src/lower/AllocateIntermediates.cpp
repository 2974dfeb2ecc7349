/** \file Pass: allocate every Func that is not an output, sized by its flattened layout
 * (the library computes every size; users never do). Allocations wrap the whole computation,
 * producers outermost, except a sliced producer's (compute_at, ComputeAt.cpp: can_slice): one
 * slice is allocated in the body of each loop over its slice loop that writes it, so a row's
 * exponentials or an attention head's scores take one row's or one head's memory (per thread,
 * when the loop is parallel: each iteration allocates its own). A slice of at most
 * kStackSliceBytes of constant size lives on the stack (registers, for a scalar per row).
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/pipeline.cpp,
 * tests/correctness/compute_at.cpp (sliced storage). */
#include <set>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Where each slice is allocated: the body of each loop over the slice loop that writes the
 * buffer, moved out to the body of an enclosing loop while the slice's size does not change
 * there: the loop left is not parallel (each thread needs its own slice), and the size uses no
 * variable bound inside it. A row's exponentials E[len(b)] are then allocated once per sentence,
 * not once per row. No move out of a branch (the size may read what the branch guards). */
class SlicePlacement : public IRVisitor {
public:
    explicit SlicePlacement(const TensorStorage &st) : st_(st) {
        visit_exprs(st.slice_size, [&](const Expr &e) {
            if (const VarNode *v = e.as<VarNode>()) size_vars_.insert(v);
        });
    }
    std::set<const For *> targets; ///< the loops whose bodies allocate a slice

    using IRVisitor::visit_node;
    void visit_node(const For *op) override {
        frames_.push_back(Frame{op, {op->var.get()}});
        if (op->var.get() == st_.slice_loop && stores_buffer(op->body)) {
            size_t k = frames_.size() - 1; // the slice loop itself: its body allocates
            while (k > 0 && frames_[k].loop && frames_[k].loop->for_kind != ForKind::Parallel &&
                   !uses_any(frames_[k].bound) && frames_[k - 1].loop)
                k--;
            targets.insert(frames_[k].loop);
        } else {
            IRVisitor::visit_node(op);
        }
        frames_.pop_back();
    }
    void visit_node(const LetStmt *op) override {
        bind(op->var.get(), [&] { IRVisitor::visit_node(op); });
    }
    void visit_node(const LocalVar *op) override {
        bind(op->var.get(), [&] { IRVisitor::visit_node(op); });
    }
    void visit_node(const IfThenElse *op) override {
        frames_.push_back(Frame{nullptr, {}}); // a barrier: nothing moves out of a branch
        IRVisitor::visit_node(op);
        frames_.pop_back();
    }

private:
    struct Frame {
        const For *loop;                 ///< null: a branch
        std::set<const VarNode *> bound; ///< the variables bound in its body (its own index included)
    };
    template <typename F> void bind(const VarNode *v, F &&visit_body) {
        if (!frames_.empty()) frames_.back().bound.insert(v);
        visit_body();
        if (!frames_.empty()) frames_.back().bound.erase(v);
    }
    bool uses_any(const std::set<const VarNode *> &vars) const {
        for (const VarNode *v : vars)
            if (size_vars_.count(v)) return true;
        return false;
    }
    bool stores_buffer(const Stmt &s) const {
        bool found = false;
        visit_stmts(s, [&](const Stmt &x) {
            if (const Store *st = x.as<Store>()) found = found || st->buffer.get() == st_.buffer.get();
        });
        return found;
    }
    const TensorStorage &st_;
    std::set<const VarNode *> size_vars_;
    std::vector<Frame> frames_;
};

/** Wraps the bodies of the placement's loops in the slice's allocation. */
class AllocateSlices : public IRMutator {
public:
    AllocateSlices(const TensorStorage &st, std::set<const For *> targets) : st_(st), targets_(std::move(targets)) {
        const int64_t *n = as_const_int(st.slice_size);
        if (n && *n <= kStackSliceBytes / st.buffer->type.bytes()) memory_ = MemoryType::Stack;
    }

protected:
    Stmt mutate_node(const For *op, const Stmt &self) override {
        Stmt s = IRMutator::mutate_node(op, self);
        if (!targets_.count(op)) return s;
        return s.as<For>()->with([&](For &f) { f.body = Allocate::make(st_.buffer, st_.slice_size, f.body, memory_); });
    }

private:
    const TensorStorage &st_;
    std::set<const For *> targets_;
    MemoryType memory_ = MemoryType::Heap;
};

} // namespace

Stmt allocate_intermediates(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage) {
    Stmt body = s;
    for (auto it = ctx.funcs.rbegin(); it != ctx.funcs.rend(); ++it) {
        if (ctx.is_output(it->get())) continue;
        const TensorStorage &st = storage.at(it->get());
        if (st.slice_loop) {
            SlicePlacement placement(st);
            placement.visit(body);
            CORA_CHECK(!placement.targets.empty(), "the slice loop of '" + (*it)->name + "' vanished");
            body = AllocateSlices(st, placement.targets).mutate(body);
            continue;
        }
        body = Allocate::make(st.buffer, st.flat.size, body);
    }
    return body;
}

} // namespace cora::ir
