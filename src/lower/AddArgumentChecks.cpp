/** \file Pass: argument checks at the top of the kernel, before anything is written.
 *
 * In order: params within their declared ranges; each length array has the expected element
 * count and every value within its range; each aux array has the expected size and passes its
 * kind's check (AuxKind::check: prefix sums consistent with the lengths, fusion maps inverting
 * their prefix sums), dependencies first; each tensor buffer has
 * exactly its layout's size, and every element of an index tensor (Tensor::index_range, e.g. BSR
 * column indices) is within its declared range; length arrays and index tensors with values known
 * when compiling (LengthArray::constant, Tensor::index_values) hold exactly those values, compared
 * with constant arrays the function declares; every remap array is a permutation (on
 * Target::Cuda, whose entry gets device pointers, the CUDA runtime checks index tensors
 * instead). A failed
 * check stops the kernel with a message naming the argument, expected and actual values.
 * (Argument count and element types are checked by the generated entry before this.)
 * AOT kernels (build_aux_in_kernel) build their aux arrays after the param and length checks
 * instead of checking them, and get a second body that only reports the tensor sizes.
 * Code generation evaluates every check's integer arithmetic overflow-checked: a size or offset
 * that does not fit in 64 bits fails its check instead of wrapping around to a value that passes.
 * Tests: tests/error/runtime_errors.cpp. */
#include <map>
#include <set>

#include "analysis/AuxKind.h"
#include "analysis/StaticValues.h"
#include "ir/IRPrinter.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

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

/** Every element of an index tensor (Tensor::index_range) within its declared range: the
 * kernel addresses memory with them. The message gives the packed position and the value. */
Stmt check_index_range(const ModuleArg &a) {
    VarPtr i = make_var("i", VarRole::Index);
    Expr v = Cast::make(Int64, Load::make(a.var, var_expr(i)));
    const TensorNode &t = *a.tensor;
    Stmt body = Assert::make(
        And::make(GE::make(v, IntImm::make(t.min_value)), LE::make(v, IntImm::make(t.max_value))),
        {"index tensor '" + a.name + "': element ", " (packed position) is ",
         ", outside its declared range [" + std::to_string(t.min_value) + ", " + std::to_string(t.max_value) + "]"},
        {var_expr(i), v});
    return For::make(i, IntImm::make(0), a.expected_count, ForKind::Serial, body);
}

/** Every element of a length array or index tensor with values known when compiling equals
 * its value (the kernel may have been specialised to them: Func::dismantle), compared with a
 * constant array of the values. A different pattern passed at run time is an error, never a
 * wrong result. */
Stmt check_static_values(const ModuleArg &a, const std::vector<int64_t> &values, const char *what,
                         std::vector<ConstantArray> &constants) {
    VarPtr table = make_var(a.name + "_static", VarRole::Buffer, a.var->type);
    constants.push_back(ConstantArray{table, values});
    const int64_t n = (int64_t)values.size();
    Stmt count = Assert::make(EQ::make(var_expr(a.count_var), IntImm::make(n)),
                              {std::string(what) + " '" + a.name + "' has ",
                               " elements; the kernel was compiled for its " + std::to_string(n) + " constant values"},
                              {var_expr(a.count_var)});
    VarPtr i = make_var("i", VarRole::Index);
    Expr v = Cast::make(Int64, Load::make(a.var, var_expr(i)));
    Expr c = Cast::make(Int64, Load::make(table, var_expr(i)));
    Stmt each = For::make(i, IntImm::make(0), IntImm::make(n), ForKind::Serial,
                          Assert::make(EQ::make(v, c),
                                       {std::string(what) + " '" + a.name + "': element ", " is ",
                                        ", but the kernel was compiled for the constant value ",
                                        " (a static pattern: pass the same "
                                        "values, or compile for run-time ones)"},
                                       {var_expr(i), v, c}));
    return Block::make({count, each});
}

} // namespace

CheckedBodies add_argument_checks(const Stmt &s, const std::vector<ModuleArg> &args,
                                  const std::vector<Permutation> &permutations, const LoweringContext &ctx) {
    // `inputs`: params and length arrays, which everything else is computed from; `checks`:
    // the rest, which may read aux arrays (built between the two in AOT kernels).
    std::vector<Stmt> inputs, checks;
    std::vector<ConstantArray> constants;
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
            const std::string title = input_array_title(*a.uf);
            inputs.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {title + " has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            VarPtr i = make_var("i", VarRole::Index);
            Expr v = Cast::make(Int64, Load::make(a.var, var_expr(i)));
            Stmt body = Assert::make(
                And::make(GE::make(v, IntImm::make(a.uf->min_value)), LE::make(v, IntImm::make(a.uf->max_value))),
                {title + ": element ", " is ",
                 ", expected a value in [" + std::to_string(a.uf->min_value) + ", " + std::to_string(a.uf->max_value) +
                     "]"},
                {var_expr(i), v});
            inputs.push_back(For::make(i, IntImm::make(0), a.expected_count, ForKind::Serial, body));
            if (a.uf->static_values)
                inputs.push_back(check_static_values(a, *a.uf->static_values, "length array", constants));
            break;
        }
        case ModuleArg::Kind::AuxArray:
            if (ctx.build_aux_in_kernel) break; // built, not passed
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"aux array '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            if (Stmt check = aux_kind(*a.uf->aux).check(AuxArray{a.uf, a.name, a.var}, ctx.aux); check.defined())
                checks.push_back(check);
            break;
        case ModuleArg::Kind::Input:
        case ModuleArg::Kind::Output:
            checks.push_back(Assert::make(EQ::make(var_expr(a.count_var), a.expected_count),
                                          {"buffer for tensor '" + a.name + "' has ", " elements, expected ", ""},
                                          {var_expr(a.count_var), a.expected_count}));
            // On Target::Cuda the entry gets tensors in device memory, which the host cannot read:
            // the CUDA runtime checks an index tensor's values where they pass through the host
            // (driver/CudaRuntime.cpp: DeviceBuffer::upload, Kernel::run on host buffers).
            if (a.kind == ModuleArg::Kind::Input && a.tensor->has_value_range && ctx.target != Target::Cuda)
                checks.push_back(check_index_range(a));
            if (a.kind == ModuleArg::Kind::Input && a.tensor->static_values && ctx.target != Target::Cuda) {
                const int64_t n = (int64_t)a.tensor->static_values->size();
                const Expr layout_size = StaticValues().fold(a.expected_count);
                if (const int64_t *size = as_const_int(layout_size); size && *size != n)
                    throw_compile_error("index tensor '", a.name, "' has ", n, " index_values, but its layout holds ",
                                        *size, " elements");
                checks.push_back(check_static_values(a, *a.tensor->static_values, "index tensor", constants));
            }
            break;
        }
    }
    std::set<const UFNode *> checked;
    for (const Permutation &p : permutations)
        if (checked.insert(p.fn.get()).second) checks.push_back(check_permutation(p));
    checks.push_back(s);
    CheckedBodies out;
    out.constants = constants;
    if (!ctx.build_aux_in_kernel) {
        inputs.insert(inputs.end(), checks.begin(), checks.end());
        out.entry = Block::make(inputs);
        return out;
    }
    out.sizes = make_var("sizes", VarRole::Buffer, Int64);
    // Every array argument's element count: the tensors, then the length arrays (the order of the
    // AOT header's enum).
    std::vector<Stmt> sizes;
    auto report = [&](const ModuleArg &a, const char *what) {
        // Checked like every argument check: a size that overflows is reported, never wrapped.
        Expr index = IntImm::make((int64_t)(sizes.size() / 2));
        sizes.push_back(Assert::make(GE::make(a.expected_count, IntImm::make(0)),
                                     {std::string(what) + " '" + a.name + "' would have ", " elements"},
                                     {a.expected_count}));
        sizes.push_back(Store::make(out.sizes, index, a.expected_count));
    };
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::Input || a.kind == ModuleArg::Kind::Output) report(a, "tensor");
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::LengthArray) report(a, a.uf->dims.empty() ? "length array" : "shape tensor");
    std::vector<Stmt> sizes_body = inputs;
    sizes_body.push_back(build_aux_arrays(Block::make(sizes), args, ctx));
    out.size_query = Block::make(sizes_body);
    inputs.push_back(build_aux_arrays(Block::make(checks), args, ctx));
    out.entry = Block::make(inputs);
    return out;
}

} // namespace cora::ir
