/** \file Pass: expand dismantled loops (Func::dismantle; SparTA's `dismantle`) into one copy of
 * the body per iteration, the loop index a constant in each.
 *
 * With the index constant, reads of values known when compiling fold (analysis/StaticValues.h):
 * in a block-sparse product with a static pattern, dismantling the block-row loop makes the
 * number of present blocks of each row a constant, dismantling the loop over those blocks makes
 * each block's column and the offset of its values constants. The kernel then loads no index,
 * and an absent block leaves no code (SparTA's dead-code elimination is the empty iteration
 * range). Outer dismantled loops are expanded first, so an inner one may depend on them.
 *
 * Requires: storage lowered (loads at flat offsets through UF calls, not yet materialized).
 * Ensures: no loop of kind Dismantled; every expansion's extent was a constant, and the loops of
 * one pipeline expanded to at most kMaxDismantledCopies bodies, else CompileError naming the loop.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/static_patterns.cpp. */
#include <map>

#include "analysis/StaticValues.h"
#include "cora/Tensor.h"
#include "ir/IRPrinter.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

class Dismantler : public IRMutator {
public:
    explicit Dismantler(StaticValues &values) : values_(values) {}

protected:
    Stmt mutate_node(const For *op, const Stmt &self) override {
        if (inside_ > 0 && is_const(values_.fold(op->extent), 0)) return Block::make({}); // no iteration
        if (op->for_kind != ForKind::Dismantled && !(inside_ > 0 && expand_inside(op)))
            return IRMutator::mutate_node(op, self);
        inside_++;
        Stmt out = expand(op);
        inside_--;
        return out;
    }
    /** Inside a dismantled body, loops the C compiler would unroll anyway are expanded here too:
     * straight-line copies cost it little, while thousands of small loops in one function made
     * clang's loop passes superlinear (an 11 s compile for 144 32x32 blocks was 6 s in LoopUnroll). */
    bool expand_inside(const For *op) const {
        const int64_t *e = as_const_int(op->extent);
        return e && as_const_int(op->min) && (op->for_kind == ForKind::Unrolled || *e == 1);
    }
    Stmt expand(const For *op) {
        Expr min = values_.fold(op->min), extent = values_.fold(op->extent);
        const int64_t *m = as_const_int(min), *e = as_const_int(extent);
        if (!m || !e)
            throw_compile_error("dismantle: loop '", op->var->name, "' runs over ", print(op->extent), " from ",
                                print(op->min),
                                ", which is not known when compiling. Its length arrays and index tensors need "
                                "values known when compiling (LengthArray::constant, Tensor::index_values, a "
                                "BsrMatrix with a static pattern), and the loops it depends on must be dismantled "
                                "too, outside it");
        if (op->for_kind == ForKind::Dismantled) copies_ += std::max<int64_t>(*e, 0);
        if (copies_ > cora::kMaxDismantledCopies)
            throw_compile_error("dismantle: expanding loop '", op->var->name, "' makes more than ",
                                cora::kMaxDismantledCopies,
                                " copies of dismantled bodies in this pipeline; the generated code would grow "
                                "with the pattern. Dismantle fewer loops (e.g. only the block rows) or keep the "
                                "pattern a run-time one");
        std::vector<Stmt> copies;
        for (int64_t i = 0; i < *e; i++) {
            Stmt body = values_.fold(substitute(op->body, {{op->var.get(), IntImm::make(*m + i)}}));
            copies.push_back(mutate(body)); // dismantled loops inside, now with this index fixed
        }
        return copies.empty() ? Block::make({}) : Block::make(copies);
    }
    /** Inside a dismantled body, a let the constants decided (a domain index, k = ko * bc + ki) is
     * substituted, so the reads through it fold too. */
    Stmt mutate_node(const LetStmt *op, const Stmt &self) override {
        if (inside_ > 0) {
            Expr v = values_.fold(op->value);
            if (as_const_int(v)) return mutate(values_.fold(substitute(op->body, {{op->var.get(), v}})));
        }
        return IRMutator::mutate_node(op, self);
    }
    /** A condition the constants decided (a guard of a block row past the matrix, say). */
    Stmt mutate_node(const IfThenElse *op, const Stmt &self) override {
        if (const int64_t *c = as_const_int(op->cond)) {
            if (*c) return mutate(op->then_case);
            return op->else_case.defined() ? mutate(op->else_case) : Block::make({});
        }
        return IRMutator::mutate_node(op, self);
    }

private:
    StaticValues &values_;
    int64_t copies_ = 0;
    int inside_ = 0; ///< dismantled loops around the node
};

bool has_dismantled_loop(const Stmt &s) {
    bool found = false;
    visit_stmts(s, [&](const Stmt &x) {
        if (const For *f = x.as<For>()) found = found || f->for_kind == ForKind::Dismantled;
    });
    return found;
}

} // namespace

Stmt dismantle_loops(const Stmt &s, const StorageMap &storage) {
    if (!has_dismantled_loop(s)) return s;
    std::map<const VarNode *, const std::vector<int64_t> *> tensor_values;
    for (auto &[t, st] : storage)
        if (t->static_values) tensor_values[st.buffer.get()] = t->static_values.get();
    StaticValues values(std::move(tensor_values));
    return Dismantler(values).mutate(s);
}

} // namespace cora::ir
