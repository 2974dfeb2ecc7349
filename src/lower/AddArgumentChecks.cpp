/** \file Pass: argument checks at the top of the kernel, before anything is written.
 *
 * In order: params within their declared ranges; each length array has the expected element
 * count and every value within its range; each aux array has the expected size and is
 * consistent with the lengths (first entry 0, consecutive differences equal to the slice
 * sizes), dependencies first; each tensor buffer has exactly its layout's size. A failed
 * check stops the kernel with a message naming the argument, expected and actual values.
 * (Argument count and element types are checked by the generated entry before this.)
 * Tests: tests/error/runtime_errors.cpp. */
#include <map>

#include "ir/IRPrinter.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

Stmt check_aux_consistency(const ModuleArg &a) {
    const AuxSpec &spec = *a.uf->aux;
    const Layout &l = spec.layout;
    FlatLayout flat = flatten_layout(l);
    std::vector<Expr> idx;
    for (auto &ld : l)
        idx.push_back(var_expr(ld.dim->var));
    Expr x = idx.back();
    auto at = [&](const Expr &last) {
        std::vector<Expr> i = idx;
        i.back() = last;
        return Load::make(a.var, flat_offset(flat, l, i));
    };
    Expr summed_extent = Sub::make(l.back().extent, IntImm::make(1));
    Expr diff = Sub::make(at(Add::make(x, IntImm::make(1))), at(x));
    Stmt step = Assert::make(EQ::make(diff, spec.summand),
                             {"aux array '" + a.name + "' is inconsistent with the lengths: entry ", " - entry ", " = ",
                              ", expected ", " (" + print(spec.summand) + ")"},
                             {Add::make(x, IntImm::make(1)), x, diff, spec.summand});
    Stmt first = Assert::make(EQ::make(at(IntImm::make(0)), IntImm::make(0)),
                              {"aux array '" + a.name + "' must start at 0, got ", ""}, {at(IntImm::make(0))});
    Stmt s = Block::make({first, For::make(l.back().dim->var, IntImm::make(0), summed_extent, ForKind::Serial, step)});
    for (int k = (int)l.size() - 2; k >= 0; k--)
        s = For::make(l[k].dim->var, IntImm::make(0), l[k].extent, ForKind::Serial, s);
    return s;
}

} // namespace

Stmt add_argument_checks(const Stmt &s, LoweringContext &ctx) {
    std::vector<Stmt> checks;
    for (const ModuleArg &a : ctx.args) {
        switch (a.kind) {
        case ModuleArg::Kind::Param: {
            Expr p = var_expr(a.var);
            checks.push_back(Assert::make(
                And::make(GE::make(p, IntImm::make(a.var->min_value)), LE::make(p, IntImm::make(a.var->max_value))),
                {"param '" + a.name + "' = ", " is outside its declared range [" + std::to_string(a.var->min_value) +
                                                  ", " + std::to_string(a.var->max_value) + "]"},
                {p}));
            break;
        }
        case ModuleArg::Kind::LengthArray: {
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"length array '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            VarPtr i = make_var("i", VarRole::Index);
            Expr v = Cast::make(Int64, Load::make(a.var, var_expr(i)));
            Stmt body = Assert::make(
                And::make(GE::make(v, IntImm::make(a.uf->min_value)), LE::make(v, IntImm::make(a.uf->max_value))),
                {"length array '" + a.name + "': element ", " is ",
                 ", expected a value in [" + std::to_string(a.uf->min_value) + ", " + std::to_string(a.uf->max_value) +
                     "]"},
                {var_expr(i), v});
            checks.push_back(For::make(i, IntImm::make(0), a.expected_count, ForKind::Serial, body));
            break;
        }
        case ModuleArg::Kind::AuxArray:
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"aux array '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            checks.push_back(check_aux_consistency(a));
            break;
        case ModuleArg::Kind::Input:
        case ModuleArg::Kind::Output:
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"buffer for tensor '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            break;
        }
    }
    checks.push_back(s);
    return Block::make(checks);
}

} // namespace cora::ir
