/** \file The AOT kernels and wrappers (AotLibrary.h). */
#include "codegen/AotLibrary.h"

#include <algorithm>

#include "codegen/CRuntime.h"
#include "codegen/EntryFunction.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

std::string param_name(const ModuleArg &a) {
    std::string n = c_identifier(a.name);
    for (const char *own : {"args", "error", "error_size", "scratch", "sizes"})
        if (n == own) return n + "_";
    return n;
}

std::string typed_params(const std::vector<const ModuleArg *> &args) {
    std::string p;
    for (const ModuleArg *a : args) {
        std::string n = param_name(*a);
        if (a->kind == ModuleArg::Kind::Param) {
            p += "int64_t " + n + ", ";
            continue;
        }
        bool writable = a->kind == ModuleArg::Kind::Output;
        p += std::string(writable ? "" : "const ") + a->var->type.c_name() + " *" + n + ", int64_t " + n + "_count, ";
    }
    return p;
}

std::string typed_call(const std::vector<const ModuleArg *> &args, const std::string &target,
                       const std::string &extra_args) {
    std::string b = "    cora_arg_t args[" + std::to_string(std::max<size_t>(args.size(), 1)) + "] = {};\n";
    for (size_t i = 0; i < args.size(); i++) {
        const ModuleArg *a = args[i];
        std::string n = param_name(*a), ai = "    args[" + std::to_string(i) + "]";
        b += ai + ".name = \"" + c_escape(a->name, false) + "\";\n";
        if (a->kind == ModuleArg::Kind::Param) {
            b += ai + ".type_code = " + std::to_string(type_code(Int64)) + ";\n" + ai + ".is_scalar = 1;\n" + ai +
                 ".scalar = " + n + ";\n";
        } else {
            b += ai + ".type_code = " + std::to_string(type_code(a->var->type)) + ";\n" + ai +
                 ".data = const_cast<void *>(static_cast<const void *>(" + n + "));\n" + ai + ".count = " + n +
                 "_count;\n";
        }
    }
    b += "    char scratch[1];\n    if (!error || error_size <= 0) { error = scratch; error_size = 1; }\n";
    b += "    return " + target + "(args, " + std::to_string(args.size()) + ", " + extra_args + "error, error_size);\n";
    return b;
}

AotSource codegen_c_aot(const Module &m, const std::string &function_name,
                        const std::vector<std::string> &variant_conditions) {
    return codegen_c_aot(std::vector<const Module *>(variant_conditions.size(), &m), function_name, variant_conditions);
}

namespace {

/** CompileError unless variant `v`'s entry takes the arguments of variant 0's. */
void require_same_arguments(const LoweredFunc &first, const LoweredFunc &other, size_t v) {
    auto describe = [](const ModuleArg &a) {
        std::string d = a.name + " (" + std::to_string((int)a.kind) + ", " + a.var->type.str();
        if (a.expected_count.defined()) d += ", " + print(a.expected_count) + " elements";
        return d + ")";
    };
    if (first.args.size() != other.args.size())
        throw_compile_error("AOT target variant ", v, " has ", other.args.size(), " arguments, variant 0 has ",
                            first.args.size(), "; every target's build must define the same function");
    for (size_t i = 0; i < first.args.size(); i++)
        if (describe(first.args[i]) != describe(other.args[i]))
            throw_compile_error("AOT target variant ", v, ": argument ", i, " is ", describe(other.args[i]),
                                ", variant 0 has ", describe(first.args[i]),
                                "; schedules may differ per target, names and storage layouts may not");
}

} // namespace

AotSource codegen_c_aot(const std::vector<const Module *> &variants, const std::string &function_name,
                        const std::vector<std::string> &variant_conditions) {
    CORA_CHECK(variants.size() == variant_conditions.size() && !variants.empty(),
               "codegen_c_aot: one module per variant");
    const Module &m = *variants[0];
    for (size_t v = 1; v < variants.size(); v++)
        require_same_arguments(m.entry(), variants[v]->entry(), v);
    const LoweredFunc *size_query = m.function(FunctionKind::SizeQuery);
    CORA_CHECK(size_query != nullptr, "codegen_c_aot: the module was lowered without build_aux_in_kernel");
    const LoweredFunc &entry = m.entry();
    CORA_CHECK(!variant_conditions.empty(), "codegen_c_aot: no target variant");
    const std::string fn = c_identifier(function_name);
    std::vector<const ModuleArg *> abi = arg_list(entry), shape = arg_list(*size_query);
    AotSource out;
    const std::string argv_params = "(const cora_arg_t *args, int32_t nargs, char *error, int32_t error_size)";
    size_t n = variant_conditions.size();
    bool direct = n == 1 && variant_conditions[0].empty(); // no dispatch needed
    std::string &src = out.wrappers;
    src = c_prologue() + "\n";
    if (direct) {
        out.kernels.push_back(c_prologue() + "\n" + emit_function("extern \"C\" ", fn + "_argv", entry));
    } else {
        // One kernel per target; the entry picks the first whose CPU check passes, once (as a
        // cora_entry_fn, the ABI's entry type from the prologue).
        std::string pick = "    static const cora_entry_fn chosen = [] {\n";
        for (size_t v = 0; v < n; v++) {
            std::string sym = fn + "_argv_" + std::to_string(v);
            out.kernels.push_back(c_prologue() + "\n" + emit_function("extern \"C\" ", sym, variants[v]->entry()));
            src += "extern \"C\" int32_t " + sym + argv_params + ";\n";
            pick += variant_conditions[v].empty() ? "        return &" + sym + ";\n"
                                                  : "        if (" + variant_conditions[v] + ") return &" + sym + ";\n";
        }
        if (!variant_conditions.back().empty()) pick += "        return (cora_entry_fn) nullptr;\n";
        pick += "    }();\n";
        src += "extern \"C\" int32_t " + fn + "_argv" + argv_params + " {\n" + pick +
               "    if (!chosen) {\n        if (!error || error_size <= 0) return 1;\n"
               "        std::snprintf(error, error_size, \"" +
               c_escape(fn, true) +
               ": this CPU supports none of the targets the library was built for\");\n        return 1;\n    }\n" +
               "    return chosen(args, nargs, error, error_size);\n}\n";
    }
    if (direct) src += "extern \"C\" int32_t " + fn + "_argv" + argv_params + ";\n";
    src += '\n'; // appended separately: GCC 12 warns falsely (-Wrestrict) on "\n" + std::string&&
    src += emit_function("static ", fn + "_sizes_argv", *size_query);
    src += "\nextern \"C\" int32_t " + fn + "(" + typed_params(abi) + "char *error, int32_t error_size) {\n" +
           typed_call(abi, fn + "_argv", "") + "}\n";
    src += "\nextern \"C\" int32_t " + fn + "_buffer_sizes(" + typed_params(shape) +
           "int64_t *sizes, char *error, int32_t error_size) {\n" + typed_call(shape, fn + "_sizes_argv", "sizes, ") +
           "}\n";
    // For callers without the header (python/cora/aot.py): the size query through the generic ABI,
    // and the arguments described as JSON.
    src += "\nextern \"C\" int32_t " + fn +
           "_buffer_sizes_argv(const cora_arg_t *args, int32_t nargs, int64_t *sizes, char *error, int32_t "
           "error_size) {\n    char scratch[1];\n    if (!error || error_size <= 0) { error = scratch; error_size = 1; "
           "}\n    return " +
           fn + "_sizes_argv(args, nargs, sizes, error, error_size);\n}\n";
    src += "\nextern \"C\" const char *" + fn + "_signature(void) {\n    return \"" +
           c_escape(aot_signature(m, fn), false) + "\";\n}\n";

    out.header = aot_header(m, fn);
    return out;
}

} // namespace cora::ir
