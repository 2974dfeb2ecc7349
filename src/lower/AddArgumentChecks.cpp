/** \file Pass: argument checks at the top of the kernel, before anything is written.
 *
 * In order: params within their declared ranges; each length array has the expected element
 * count and every value within its range; each aux array has the expected size and is
 * consistent with the lengths (first entry 0, consecutive differences equal to the slice
 * sizes), dependencies first; fusion maps invert their prefix sums; each tensor buffer has
 * exactly its layout's size; every remap array is a permutation. A failed
 * check stops the kernel with a message naming the argument, expected and actual values.
 * (Argument count and element types are checked by the generated entry before this.)
 * AOT kernels (build_aux_in_kernel) build their aux arrays after the param and length checks
 * instead of checking them, and get a second body that only reports the tensor sizes.
 * Code generation evaluates every check's integer arithmetic overflow-checked: a size or offset
 * that does not fit in 64 bits fails its check instead of wrapping around to a value that passes.
 * Tests: tests/error/runtime_errors.cpp. */
#include <map>
#include <set>

#include "ir/IRPrinter.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

Stmt check_aux_consistency(const ModuleArg &a, AuxTable &table) {
    const AuxSpec &spec = *a.uf->aux;
    const Layout &l = spec.layout;
    FlatLayout flat = flatten_layout(table, l);
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

/** fo/fi must be the fusion maps of their prefix sum P (the kernel indexes memory with them):
 * 0 <= fo[f] < E_o; P[fo[f]] <= f < P[fo[f] + 1] inside the total, fo[f] = E_o - 1 in the pad
 * segment; fi[f] = f - P[fo[f]]. O(total) per call, cheap next to the work per entry. */
Stmt check_fusion_map(const ModuleArg &a) {
    const AuxSpec &spec = *a.uf->aux;
    VarPtr f = make_var("f", VarRole::Index);
    Expr fv = var_expr(f);
    auto P = [&](const Expr &x) { return UFCall::make(spec.prefix, {x}); };
    Expr eo = spec.outer_extent;
    Expr self = UFCall::make(a.uf, {fv});
    std::vector<Stmt> body;
    if (spec.kind == AuxSpec::Kind::FusedOuter) {
        body.push_back(Assert::make(And::make(GE::make(self, IntImm::make(0)), LT::make(self, eo)),
                                    {"fusion map '" + a.name + "': entry ", " is ", ", expected a value in [0, ", ")"},
                                    {fv, self, eo}));
        Expr inside = And::make(LE::make(P(self), fv), LT::make(fv, P(Add::make(self, IntImm::make(1)))));
        Expr ok = Select::make(LT::make(fv, P(eo)), inside, EQ::make(self, Sub::make(eo, IntImm::make(1))));
        body.push_back(Assert::make(
            ok,
            {"fusion map '" + a.name + "': entry ", " is ", ", which is not the outer index of that fused iteration"},
            {fv, self}));
    } else {
        Expr want = Sub::make(fv, P(UFCall::make(spec.partner, {fv})));
        body.push_back(Assert::make(EQ::make(self, want),
                                    {"fusion map '" + a.name + "': entry ", " is ", ", expected ", ""},
                                    {fv, self, want}));
    }
    return For::make(f, IntImm::make(0), spec.layout[0].extent, ForKind::Serial, Block::make(body));
}

/** perm(p) for p < E is a permutation of [0, E): in range, and no value twice (a scratch
 * array of E flags). CoRA's unchecked remap skipped a block row at M >= 4096; this cannot. */
Stmt check_permutation(const Permutation &perm) {
    VarPtr seen = make_var("seen_" + perm.loop, VarRole::Buffer, Int32);
    VarPtr i = make_var("i", VarRole::Index), p = make_var("p", VarRole::Index);
    Expr v = UFCall::make(perm.fn, {var_expr(p)});
    const std::string what = "remap of loop '" + perm.loop + "' ('" + perm.fn->name + "')";
    Stmt clear = For::make(i, IntImm::make(0), perm.extent, ForKind::Serial,
                           Store::make(seen, var_expr(i), IntImm::make(0, Int32)));
    Stmt body = Block::make({
        Assert::make(And::make(GE::make(v, IntImm::make(0)), LT::make(v, perm.extent)),
                     {what + ": entry ", " is ", ", expected a value in [0, ", ")"}, {var_expr(p), v, perm.extent}),
        Assert::make(EQ::make(Load::make(seen, v), IntImm::make(0, Int32)),
                     {what + " is not a permutation: value ", " appears again at entry ", ""}, {v, var_expr(p)}),
        Store::make(seen, v, IntImm::make(1, Int32)),
    });
    Stmt scan = For::make(p, IntImm::make(0), perm.extent, ForKind::Serial, body);
    return Allocate::make(seen, perm.extent, Block::make({clear, scan}));
}

} // namespace

CheckedBodies add_argument_checks(const Stmt &s, const std::vector<ModuleArg> &args,
                                  const std::vector<Permutation> &permutations, const LoweringContext &ctx) {
    // `inputs`: params and length arrays, which everything else is computed from; `checks`:
    // the rest, which may read aux arrays (built between the two in AOT kernels).
    std::vector<Stmt> inputs, checks;
    for (const ModuleArg &a : args) {
        switch (a.kind) {
        case ModuleArg::Kind::Param: {
            Expr p = var_expr(a.var);
            inputs.push_back(Assert::make(
                And::make(GE::make(p, IntImm::make(a.var->min_value)), LE::make(p, IntImm::make(a.var->max_value))),
                {"param '" + a.name + "' = ", " is outside its declared range [" + std::to_string(a.var->min_value) +
                                                  ", " + std::to_string(a.var->max_value) + "]"},
                {p}));
            break;
        }
        case ModuleArg::Kind::LengthArray: {
            inputs.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
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
            inputs.push_back(For::make(i, IntImm::make(0), a.expected_count, ForKind::Serial, body));
            break;
        }
        case ModuleArg::Kind::AuxArray:
            if (ctx.build_aux_in_kernel) break; // built, not passed
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"aux array '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            if (a.uf->aux->kind == AuxSpec::Kind::PrefixSum)
                checks.push_back(check_aux_consistency(a, ctx.aux));
            else if (a.uf->aux->kind != AuxSpec::Kind::LongestFirst) // permutations: below
                checks.push_back(check_fusion_map(a));
            break;
        case ModuleArg::Kind::Input:
        case ModuleArg::Kind::Output:
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"buffer for tensor '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            break;
        }
    }
    std::set<const UFNode *> checked;
    for (const Permutation &p : permutations)
        if (checked.insert(p.fn.get()).second) checks.push_back(check_permutation(p));
    checks.push_back(s);
    CheckedBodies out;
    if (!ctx.build_aux_in_kernel) {
        inputs.insert(inputs.end(), checks.begin(), checks.end());
        out.entry = Block::make(inputs);
        return out;
    }
    out.sizes = make_var("sizes", VarRole::Buffer, Int64);
    std::vector<Stmt> sizes;
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::Input || a.kind == ModuleArg::Kind::Output) {
            // Checked like every argument check: a size that overflows is reported, never wrapped.
            Expr index = IntImm::make((int64_t)(sizes.size() / 2));
            sizes.push_back(Assert::make(GE::make(a.expected_count, IntImm::make(0)),
                                         {"tensor '" + a.name + "' would have ", " elements"}, {a.expected_count}));
            sizes.push_back(Store::make(out.sizes, index, a.expected_count));
        }
    std::vector<Stmt> sizes_body = inputs;
    sizes_body.push_back(build_aux_arrays(Block::make(sizes), args, ctx));
    out.size_query = Block::make(sizes_body);
    inputs.push_back(build_aux_arrays(Block::make(checks), args, ctx));
    out.entry = Block::make(inputs);
    return out;
}

} // namespace cora::ir
