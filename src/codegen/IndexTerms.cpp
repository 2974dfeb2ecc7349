/** \file Reordering the terms of a printed address (IndexTerms.h). */
#include "codegen/IndexTerms.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "ir/IRVisitor.h"

namespace cora::ir {

namespace {

struct Term {
    Expr value;
    bool negative;
    int rank; ///< innermost loop depth used; INT_MAX for a constant
};

/** A sum times a constant, as the constant times each of its terms (exact in integers). */
Expr distribute(const Expr &sum, const Expr &factor) {
    if (const Add *a = sum.as<Add>()) return Add::make(distribute(a->a, factor), distribute(a->b, factor));
    if (const Sub *s = sum.as<Sub>()) return Sub::make(distribute(s->a, factor), distribute(s->b, factor));
    if (const IntImm *k = sum.as<IntImm>()) return IntImm::make(k->value * factor.as<IntImm>()->value, sum.type());
    return Mul::make(sum, factor);
}

void collect(const Expr &e, bool negative, std::vector<Term> &out) {
    const Mul *m = e.as<Mul>();
    if (m && m->b.as<IntImm>() && (m->a.as<Add>() || m->a.as<Sub>())) {
        collect(distribute(m->a, m->b), negative, out);
    } else if (const Add *a = e.as<Add>()) {
        collect(a->a, negative, out);
        collect(a->b, negative, out);
    } else if (const Sub *s = e.as<Sub>()) {
        collect(s->a, negative, out);
        collect(s->b, !negative, out);
    } else {
        out.push_back({e, negative, 0});
    }
}

} // namespace

Expr order_index_terms(const Expr &index, const std::function<int(const VarNode *)> &depth) {
    if (!index.defined() || !index.type().is_int() || (!index.as<Add>() && !index.as<Sub>())) return index;
    std::vector<Term> terms;
    collect(index, false, terms);
    if (terms.size() < 3) return index;
    for (Term &t : terms) {
        if (t.value.as<IntImm>()) {
            t.rank = INT_MAX;
            continue;
        }
        visit_exprs(t.value, [&](const Expr &x) {
            if (const VarNode *v = x.as<VarNode>()) t.rank = std::max(t.rank, depth(v));
        });
    }
    std::stable_sort(terms.begin(), terms.end(), [](const Term &a, const Term &b) { return a.rank < b.rank; });
    // A positive term first, so that no sum starts with a negation.
    auto first = std::find_if(terms.begin(), terms.end(), [](const Term &t) { return !t.negative; });
    if (first == terms.end()) return index;
    std::rotate(terms.begin(), first, first + 1);
    Expr sum = terms[0].value;
    for (size_t i = 1; i < terms.size(); i++)
        sum = terms[i].negative ? Sub::make(sum, terms[i].value) : Add::make(sum, terms[i].value);
    return sum;
}

} // namespace cora::ir
