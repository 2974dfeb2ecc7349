/** \file Pass (AOT kernels): build the aux arrays inside the kernel.
 *
 * A JIT kernel takes its aux arrays from the caller's RaggedShape, which builds them once per
 * batch and shares them between kernels. An ahead-of-time library has no RaggedShape: its
 * callers pass params, length arrays and tensors only. This pass makes the kernel compute each
 * aux array itself, with the same definition as the host prelude (AuxSpec in ir/Tensor.h):
 *   - prefix sums: entry 0 is 0, entry x + 1 = entry x + summand(x), per outer index;
 *   - fusion maps fo/fi: for each outer o, the fused iterations P(o) <= f < P(o + 1) map to
 *     (o, f - P(o)); the pad segment maps to the last o;
 *   - longest-first orders: the costs into a scratch array, then the rank of each index in a
 *     stable descending sort (index j ranks before i when its cost is larger, or equal and
 *     j < i), written at that rank. O(E^2) comparisons over E remapped rows, parallel over i;
 *     E is a number of rows or row blocks (thousands), so this stays far below the kernel.
 * Requires: the argument list (dependencies before dependants) and the param and length
 * checks placed before the result (the builders read lengths at checked indices).
 * Ensures: every aux array is a heap Allocate around `rest`, filled before `rest` runs, and
 * its argument is marked built_in_kernel (codegen leaves it out of the ABI).
 * Tests: tests/correctness/aot.cpp (every aux kind against the JIT kernel). */
#include "lower/Passes.h"

namespace cora::ir {

namespace {

Expr int_imm(int64_t v) { return IntImm::make(v); }

Stmt build_prefix_sum(const ModuleArg &a, AuxTable &table) {
    const AuxSpec &spec = *a.uf->aux;
    const Layout &l = spec.layout;
    FlatLayout flat = flatten_layout(table, l);
    std::vector<Expr> idx;
    for (const LayoutDim &ld : l)
        idx.push_back(var_expr(ld.dim->var));
    auto at = [&](const Expr &last) {
        std::vector<Expr> i = idx;
        i.back() = last;
        return flat_offset(flat, l, i);
    };
    Expr x = idx.back();
    Expr next = Add::make(Load::make(a.var, at(x)), spec.summand);
    // Evaluated overflow-checked (as every Assert): a total that does not fit in 64 bits stops
    // the kernel with a message instead of wrapping into offsets that would pass as valid.
    Stmt no_overflow =
        Assert::make(GE::make(next, int_imm(0)), {"aux array '" + a.name + "': entry ", " would be ", ""},
                     {Add::make(x, int_imm(1)), next});
    Stmt step = Block::make({no_overflow, Store::make(a.var, at(Add::make(x, int_imm(1))), next)});
    Stmt s = Block::make(
        {Store::make(a.var, at(int_imm(0)), int_imm(0)),
         For::make(l.back().dim->var, int_imm(0), Sub::make(l.back().extent, int_imm(1)), ForKind::Serial, step)});
    for (int k = (int)l.size() - 2; k >= 0; k--)
        s = For::make(l[k].dim->var, int_imm(0), l[k].extent, ForKind::Serial, s);
    return s;
}

Stmt build_fusion_map(const ModuleArg &a) {
    const AuxSpec &spec = *a.uf->aux;
    auto P = [&](const Expr &x) { return UFCall::make(spec.prefix, {x}); };
    bool outer_map = spec.kind == AuxSpec::Kind::FusedOuter;
    VarPtr o = make_var("o", VarRole::Index), f = make_var("f", VarRole::Index);
    Expr ov = var_expr(o), fv = var_expr(f);
    auto entry = [&](const Expr &outer) { return outer_map ? outer : Sub::make(fv, P(outer)); };
    Stmt rows = For::make(o, int_imm(0), spec.outer_extent, ForKind::Serial,
                          For::make(f, P(ov), Sub::make(P(Add::make(ov, int_imm(1))), P(ov)), ForKind::Serial,
                                    Store::make(a.var, fv, entry(ov))));
    // The pad segment [P(E_o), n) of bulk padding belongs to the last outer index.
    Expr last = Sub::make(spec.outer_extent, int_imm(1));
    VarPtr g = make_var("f", VarRole::Index);
    Expr gv = var_expr(g);
    Stmt pad = For::make(g, P(spec.outer_extent), Sub::make(spec.layout[0].extent, P(spec.outer_extent)),
                         ForKind::Serial, Store::make(a.var, gv, outer_map ? last : Sub::make(gv, P(last))));
    return Block::make({rows, IfThenElse::make(GT::make(spec.outer_extent, int_imm(0)), pad, Stmt())});
}

Stmt build_longest_first(const ModuleArg &a) {
    const AuxSpec &spec = *a.uf->aux;
    const VarPtr &d = spec.layout[0].dim->var;
    Expr n = spec.outer_extent;
    VarPtr cost = make_var(a.name + "_cost", VarRole::Buffer, Int64);
    VarPtr i = make_var("i", VarRole::Index), j = make_var("j", VarRole::Index);
    VarPtr rank = make_var("rank", VarRole::Local, Int64);
    Expr iv = var_expr(i), jv = var_expr(j);
    Stmt costs = For::make(d, int_imm(0), n, ForKind::Serial, Store::make(cost, var_expr(d), spec.summand));
    Expr ci = Load::make(cost, iv), cj = Load::make(cost, jv);
    Expr before = Or::make(GT::make(cj, ci), And::make(EQ::make(cj, ci), LT::make(jv, iv)));
    Stmt count = For::make(j, int_imm(0), n, ForKind::Serial,
                           Assign::make(rank, Add::make(var_expr(rank), Select::make(before, int_imm(1), int_imm(0)))));
    Stmt place = LocalVar::make(rank, int_imm(0), Block::make({count, Store::make(a.var, var_expr(rank), iv)}));
    return Allocate::make(cost, n, Block::make({costs, For::make(i, int_imm(0), n, ForKind::Parallel, place)}));
}

} // namespace

Stmt build_aux_arrays(const Stmt &rest, const std::vector<ModuleArg> &args, const LoweringContext &ctx) {
    std::vector<const ModuleArg *> aux;
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::AuxArray) aux.push_back(&a);
    Stmt s = rest;
    for (auto it = aux.rbegin(); it != aux.rend(); ++it) {
        const ModuleArg &a = **it;
        Stmt build;
        switch (a.uf->aux->kind) {
        case AuxSpec::Kind::PrefixSum: build = build_prefix_sum(a, ctx.aux); break;
        case AuxSpec::Kind::FusedOuter:
        case AuxSpec::Kind::FusedInner: build = build_fusion_map(a); break;
        case AuxSpec::Kind::LongestFirst: build = build_longest_first(a); break;
        }
        s = Allocate::make(a.var, a.expected_count, Block::make({build, s}));
    }
    return s;
}

} // namespace cora::ir
