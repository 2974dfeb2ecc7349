// order_index_terms (codegen/IndexTerms.h): the printed order of an address's terms, outer loops
// first and constants last, with the value unchanged; and the block-sparse tile's X read, whose
// unrolled terms come last so that they fold into one base.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "analysis/Simplify.h"
#include "codegen/IndexTerms.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

using namespace cora;
using namespace cora::ir;

namespace {

Expr c(int64_t v) { return IntImm::make(v); }

struct Loops {
    VarPtr tc = make_var("tc", VarRole::Index), to = make_var("to", VarRole::Index),
           ko = make_var("ko", VarRole::Index), ki = make_var("ki", VarRole::Index),
           ti = make_var("ti", VarRole::Index), arg = make_var("n", VarRole::Param);
    std::map<const VarNode *, int> depth{{tc.get(), 1}, {to.get(), 2}, {ko.get(), 3}, {ki.get(), 4}, {ti.get(), 5}};
    int operator()(const VarNode *v) const {
        auto it = depth.find(v);
        return it == depth.end() ? 0 : it->second;
    }
    Expr v(const VarPtr &x) const { return var_expr(x); }
};

/** The value of `e` with every variable set from `values`. */
int64_t value_of(const Expr &e, const std::map<const VarNode *, Expr> &values) {
    Expr s = simplify(substitute(e, values));
    const IntImm *k = s.as<IntImm>();
    REQUIRE(k != nullptr);
    return k->value;
}

} // namespace

TEST_CASE("index terms: outer loops first, unrolled inner loops and constants last", "[codegen][index_terms]") {
    Loops L;
    // ((tc * 73728 + to * 18432) + ti * 3072) + ko * 8) + ki + 5, as storage lowering writes it.
    Expr index = Add::make(
        Add::make(Add::make(Add::make(Add::make(Mul::make(L.v(L.tc), c(73728)), Mul::make(L.v(L.to), c(18432))),
                                      Mul::make(L.v(L.ti), c(3072))),
                            Mul::make(L.v(L.ko), c(8))),
                  L.v(L.ki)),
        c(5));
    Expr ordered = order_index_terms(index, L);
    Expr expected = Add::make(
        Add::make(Add::make(Add::make(Add::make(Mul::make(L.v(L.tc), c(73728)), Mul::make(L.v(L.to), c(18432))),
                                      Mul::make(L.v(L.ko), c(8))),
                            L.v(L.ki)),
                  Mul::make(L.v(L.ti), c(3072))),
        c(5));
    INFO(print(ordered));
    CHECK(equal(ordered, expected));
}

TEST_CASE("index terms: a sum times a constant splits into its terms", "[codegen][index_terms]") {
    Loops L;
    // k + (to * 4 + ti) * 40  ->  (to * 160 + k) + ti * 40
    Expr index = Add::make(L.v(L.ko), Mul::make(Add::make(Mul::make(L.v(L.to), c(4)), L.v(L.ti)), c(40)));
    Expr ordered = order_index_terms(index, L);
    Expr expected =
        Add::make(Add::make(Mul::make(Mul::make(L.v(L.to), c(4)), c(40)), L.v(L.ko)), Mul::make(L.v(L.ti), c(40)));
    INFO(print(ordered));
    CHECK(equal(ordered, expected));
}

TEST_CASE("index terms: subtractions keep their sign, a sum never starts negated", "[codegen][index_terms]") {
    Loops L;
    // (ti - ko) + (n - 1): n (an argument, depth 0) first, then -ko, then ti, then -1.
    Expr index = Add::make(Sub::make(L.v(L.ti), L.v(L.ko)), Sub::make(L.v(L.arg), c(1)));
    Expr ordered = order_index_terms(index, L);
    Expr expected = Sub::make(Add::make(Sub::make(L.v(L.arg), L.v(L.ko)), L.v(L.ti)), c(1));
    INFO(print(ordered));
    CHECK(equal(ordered, expected));
    // A first term that is negative at the lowest depth: the first positive term moves ahead.
    Expr neg_first = Add::make(Sub::make(L.v(L.ti), L.v(L.arg)), L.v(L.tc));
    Expr expected2 = Add::make(Sub::make(L.v(L.tc), L.v(L.arg)), L.v(L.ti));
    INFO(print(order_index_terms(neg_first, L)));
    CHECK(equal(order_index_terms(neg_first, L), expected2));
}

TEST_CASE("index terms: what is not a sum of three or more terms is returned as is", "[codegen][index_terms]") {
    Loops L;
    Expr two = Add::make(L.v(L.ti), L.v(L.tc));
    CHECK(order_index_terms(two, L).same_as(two));
    Expr product = Mul::make(Add::make(L.v(L.ti), L.v(L.tc)), c(4));
    CHECK(order_index_terms(product, L).same_as(product));
    // 0 - ti - tc: the constant is the only positive term, so it leads; the rest by depth.
    Expr all_negative = Sub::make(Sub::make(c(0), L.v(L.ti)), L.v(L.tc));
    Expr reordered = order_index_terms(all_negative, L);
    CHECK(equal(reordered, Sub::make(Sub::make(c(0), L.v(L.tc)), L.v(L.ti))));
    Expr f = FloatImm::make(1.0, Float32);
    Expr floats = Add::make(Add::make(f, f), f);
    CHECK(order_index_terms(floats, L).same_as(floats));
}

TEST_CASE("index terms: the value is unchanged on random sums", "[codegen][index_terms]") {
    Loops L;
    std::mt19937 rng(11);
    const VarPtr vars[] = {L.tc, L.to, L.ko, L.ki, L.ti, L.arg};
    std::uniform_int_distribution<int> pick(0, 5), coef(-40, 40), kind(0, 3), count(1, 9);
    for (int iter = 0; iter < 300; iter++) {
        Expr e = L.v(vars[pick(rng)]);
        for (int t = count(rng); t > 0; t--) {
            int k = kind(rng);
            if (k == 0 && coef(rng) > 20) e = Mul::make(e, c(coef(rng)));
            Expr term = k == 0   ? c(coef(rng))
                        : k == 1 ? Mul::make(L.v(vars[pick(rng)]), c(coef(rng)))
                                 : L.v(vars[pick(rng)]);
            e = k == 3 ? Sub::make(e, term) : (coef(rng) < 0 ? Add::make(term, e) : Add::make(e, term));
        }
        std::map<const VarNode *, Expr> values;
        std::uniform_int_distribution<int64_t> val(-1000, 1000);
        for (const VarPtr &v : vars)
            values[v.get()] = c(val(rng));
        Expr ordered = order_index_terms(e, L);
        INFO(print(e) << "  ->  " << print(ordered));
        REQUIRE(value_of(ordered, values) == value_of(e, values));
    }
}
