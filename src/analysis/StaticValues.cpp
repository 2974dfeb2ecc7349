/** \file Folding values known when compiling (StaticValues.h). */
#include "analysis/StaticValues.h"

#include "analysis/AuxKind.h"
#include "analysis/Simplify.h"
#include "ir/Tensor.h"

namespace cora::ir {

namespace {

/** The longest prefix sum computed at compile time: beyond it the pattern is not a pattern. */
constexpr int64_t kMaxStaticPrefix = int64_t{1} << 24;

} // namespace

class StaticFolder : public IRMutator {
public:
    explicit StaticFolder(StaticValues &values) : values_(values) {}

protected:
    Expr mutate_node(const UFCall *op, const Expr &self) override {
        bool changed = false;
        std::vector<Expr> args = mutate_all(op->args, changed);
        std::vector<int64_t> constants;
        for (Expr &a : args) {
            a = simplify(a);
            if (const int64_t *c = as_const_int(a)) constants.push_back(*c);
        }
        if (constants.size() == args.size())
            if (std::optional<int64_t> v = values_.uf_value(*op->fn, constants)) return IntImm::make(*v, op->type);
        return UFCall::make(op->fn, args);
    }
    Expr mutate_node(const Load *op, const Expr &self) override {
        Expr index = simplify(mutate(op->index));
        auto it = values_.tensor_values_.find(op->buffer.get());
        if (it != values_.tensor_values_.end())
            if (const int64_t *c = as_const_int(index); c && *c >= 0 && *c < (int64_t)it->second->size())
                return IntImm::make((*it->second)[(size_t)*c], op->type);
        return index.same_as(op->index) ? self : Load::make(op->buffer, index);
    }

private:
    StaticValues &values_;
};

std::optional<int64_t> StaticValues::uf_value(const UFNode &fn, const std::vector<int64_t> &args) {
    if (fn.kind == UFKind::LengthArray) {
        if (!fn.static_values || args.size() != 1 || args[0] < 0 || args[0] >= (int64_t)fn.static_values->size())
            return std::nullopt;
        return (*fn.static_values)[(size_t)args[0]];
    }
    const AuxKind *kind = aux_kind_of(fn);
    if (!kind || !kind->is_prefix_sum() || args.size() != fn.aux->layout.size() || args.empty()) return std::nullopt;
    const int64_t x = args.back();
    if (x < 0 || x > kMaxStaticPrefix) return std::nullopt;
    std::vector<int64_t> outer(args.begin(), args.end() - 1);
    std::vector<int64_t> &sums = prefix_sums_[{&fn, outer}];
    if (sums.empty()) sums.push_back(0);
    std::map<const VarNode *, Expr> at;
    for (size_t i = 0; i < outer.size(); i++)
        at[fn.aux->layout[i].dim->var.get()] = IntImm::make(outer[i]);
    const VarNode *last = fn.aux->layout.back().dim->var.get();
    while ((int64_t)sums.size() <= x) {
        at[last] = IntImm::make((int64_t)sums.size() - 1);
        const Expr summand = fold(substitute(*kind->prefix_summand(), at)); // alive while `term` points into it
        const int64_t *term = as_const_int(summand);
        int64_t next = 0;
        if (!term || __builtin_add_overflow(sums.back(), *term, &next)) return std::nullopt;
        sums.push_back(next);
    }
    return sums[(size_t)x];
}

Expr StaticValues::fold(const Expr &e) { return simplify(StaticFolder(*this).mutate(e)); }
Stmt StaticValues::fold(const Stmt &s) { return simplify(StaticFolder(*this).mutate(s)); }

} // namespace cora::ir
