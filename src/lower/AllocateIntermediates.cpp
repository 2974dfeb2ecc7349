/** \file Pass: allocate every Func that is not an output, sized by its flattened layout
 * (the library computes every size; users never do). Allocations wrap the whole computation,
 * producers outermost, except a sliced producer's (compute_at, ComputeAt.cpp: can_slice): one
 * slice is allocated in the body of each loop over its slice loop that writes it, so a row's
 * exponentials or an attention head's scores take one row's or one head's memory (per thread,
 * when the loop is parallel: each iteration allocates its own). A slice of at most
 * kStackSliceBytes of constant size lives on the stack (registers, for a scalar per row).
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/pipeline.cpp,
 * tests/correctness/compute_at.cpp (sliced storage). */
#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The largest constant slice kept on the stack. */
constexpr int64_t kStackSliceBytes = 4096;

/** Wraps the body of every loop over `loop` that stores to `buffer` in the slice's allocation. */
class AllocateSlices : public IRMutator {
public:
    AllocateSlices(const TensorStorage &st) : st_(st) {
        const int64_t *n = as_const_int(st.slice_size);
        if (n && *n * st.buffer->type.bytes() <= kStackSliceBytes) memory_ = MemoryType::Stack;
    }
    int placed = 0;

protected:
    Stmt mutate_node(const For *op, const Stmt &self) override {
        Stmt s = IRMutator::mutate_node(op, self);
        if (op->var.get() != st_.slice_loop || !stores_buffer(op->body)) return s;
        placed++;
        return s.as<For>()->with([&](For &f) { f.body = Allocate::make(st_.buffer, st_.slice_size, f.body, memory_); });
    }

private:
    bool stores_buffer(const Stmt &s) const {
        bool found = false;
        struct Stores : IRVisitor {
            const VarNode *buffer;
            bool *found;
            using IRVisitor::visit_node;
            void visit_node(const Store *st) override {
                *found = *found || st->buffer.get() == buffer;
                IRVisitor::visit_node(st);
            }
        } v;
        v.buffer = st_.buffer.get();
        v.found = &found;
        v.visit(s);
        return found;
    }
    const TensorStorage &st_;
    MemoryType memory_ = MemoryType::Heap;
};

} // namespace

Stmt allocate_intermediates(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage) {
    Stmt body = s;
    for (auto it = ctx.funcs.rbegin(); it != ctx.funcs.rend(); ++it) {
        if (ctx.is_output(it->get())) continue;
        const TensorStorage &st = storage.at(it->get());
        if (st.slice_loop) {
            AllocateSlices slices(st);
            body = slices.mutate(body);
            CORA_CHECK(slices.placed > 0, "the slice loop of '" + (*it)->name + "' vanished");
            continue;
        }
        body = Allocate::make(st.buffer, st.flat.size, body);
    }
    return body;
}

} // namespace cora::ir
