/** \file The entry function (EntryFunction.h). */
#include "codegen/EntryFunction.h"

#include <algorithm>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"

namespace cora::ir {

std::vector<const ModuleArg *> arg_list(const LoweredFunc &f) {
    std::vector<const ModuleArg *> v;
    for (const ModuleArg &a : f.args)
        v.push_back(&a);
    return v;
}

std::vector<const ModuleArg *> tensor_args(const LoweredFunc &f) {
    std::vector<const ModuleArg *> v;
    for (const ModuleArg &a : f.args)
        if (a.kind == ModuleArg::Kind::Input || a.kind == ModuleArg::Kind::Output) v.push_back(&a);
    return v;
}

namespace {

/** Checks the count, the kinds and the element types of `args` (ABI order), binds them to the
 * body's variables, then runs `body`. */
std::string emit_argv_function(CodeGen_C &g, const std::string &qualifiers, const std::string &symbol,
                               const std::vector<const ModuleArg *> &args, const std::string &extra_params,
                               const Stmt &body, const std::vector<std::pair<VarPtr, std::string>> &bind,
                               const std::vector<ConstantArray> &constants) {
    g.os << qualifiers << "int32_t " << symbol << "(const cora_arg_t *args, int32_t nargs, " << extra_params
         << "char *error, int32_t error_size) {\n";
    for (const ConstantArray &c : constants) { // values known when compiling, 16 to a line
        std::string decl = "static const " + c.var->type.c_name() + " " + g.name_of(c.var.get()) + "[" +
                           std::to_string(std::max<size_t>(c.values.size(), 1)) + "] = {";
        g.line(decl + (c.values.empty() ? "0};" : ""));
        for (size_t i = 0; i < c.values.size(); i += 16) {
            std::string row;
            for (size_t j = i; j < std::min(i + 16, c.values.size()); j++)
                row += std::to_string(c.values[j]) + ",";
            g.line("    " + row);
        }
        if (!c.values.empty()) g.line("};");
    }
    // Foreign callers may pass no message buffer; a NULL argument array or output is an error.
    g.line("char cora_no_message[1];");
    g.line("if (!error || error_size <= 0) {");
    g.line("    error = cora_no_message;");
    g.line("    error_size = 1;");
    g.line("}");
    for (auto &[var, expr] : bind) {
        g.line("if (!" + expr + ") {");
        g.line("    std::snprintf(error, error_size, \"the output array '" + c_escape(expr, true) + "' is NULL\");");
        g.line("    return 1;");
        g.line("}");
        g.line(var->type.c_name() + " *" + g.name_of(var.get()) + " = " + expr + ";");
    }
    g.line("if (nargs != " + std::to_string(args.size()) + ") {");
    g.line("    std::snprintf(error, error_size, \"expected " + std::to_string(args.size()) +
           " arguments, got %d\", (int)nargs);");
    g.line("    return 1;");
    g.line("}");
    if (!args.empty()) {
        g.line("if (!args) {");
        g.line("    std::snprintf(error, error_size, \"the argument array is NULL\");");
        g.line("    return 1;");
        g.line("}");
    }
    std::vector<size_t> arrays; // positions of array arguments, for the overlap check
    for (size_t i = 0; i < args.size(); i++) {
        const ModuleArg &a = *args[i];
        std::string ai = "args[" + std::to_string(i) + "]";
        std::string label = "argument " + std::to_string(i) + " ('" + c_escape(a.name, true) + "')";
        bool scalar = a.kind == ModuleArg::Kind::Param;
        Type t = scalar ? Int64 : a.var->type;
        g.line("if (" + ai + ".is_scalar != " + (scalar ? "1" : "0") + ") {");
        g.line(std::string("    std::snprintf(error, error_size, \"") + label + ": expected " +
               (scalar ? "a scalar" : "an array") + ", got " + (scalar ? "an array" : "a scalar") + "\");");
        g.line("    return 1;");
        g.line("}");
        g.line("if (" + ai + ".type_code != " + std::to_string(type_code(t)) + ") {");
        g.line("    std::snprintf(error, error_size, \"" + label + ": element type %s, expected " + t.str() +
               "\", cora_type_name(" + ai + ".type_code));");
        g.line("    return 1;");
        g.line("}");
        if (scalar) {
            g.line("const int64_t " + g.name_of(a.var.get()) + " = " + ai + ".scalar;");
            continue;
        }
        std::string ct = t.c_name();
        // A count whose byte size does not fit in memory cannot describe a real array.
        g.line("if (" + ai + ".count < 0 || " + ai + ".count > (int64_t)(INT64_MAX / sizeof(" + ct + ")) || (" + ai +
               ".count > 0 && " + ai + ".data == nullptr)) {");
        g.line("    std::snprintf(error, error_size, \"" + label +
               ": invalid array (count %lld, data %p)\", (long long)" + ai + ".count, " + ai + ".data);");
        g.line("    return 1;");
        g.line("}");
        arrays.push_back(i);
    }
    // Arrays are __restrict__ and outputs are written while inputs are read: an output that
    // shares memory with another argument would give silently wrong results.
    auto byte_range = [&](size_t i) {
        std::string ai = "args[" + std::to_string(i) + "]";
        return std::pair<std::string, std::string>{
            "(uintptr_t)" + ai + ".data", "(uintptr_t)" + ai + ".count * sizeof(" + args[i]->var->type.c_name() + ")"};
    };
    for (size_t x = 0; x < arrays.size(); x++) {
        size_t i = arrays[x];
        if (args[i]->kind != ModuleArg::Kind::Output) continue;
        for (size_t y = 0; y < arrays.size(); y++) {
            size_t j = arrays[y];
            if (i == j || (args[j]->kind == ModuleArg::Kind::Output && j < i)) continue; // each output pair once
            auto [pi, ni] = byte_range(i);
            auto [pj, nj] = byte_range(j);
            g.line("if (" + ni + " > 0 && " + nj + " > 0 && " + pi + " < " + pj + " + " + nj + " && " + pj + " < " +
                   pi + " + " + ni + ") {");
            g.line("    std::snprintf(error, error_size, \"output argument " + std::to_string(i) + " ('" +
                   c_escape(args[i]->name, true) + "') overlaps argument " + std::to_string(j) + " ('" +
                   c_escape(args[j]->name, true) +
                   "') in memory; an output must not share memory with any other argument (use a separate "
                   "buffer)\");");
            g.line("    return 1;");
            g.line("}");
        }
    }
    for (size_t i : arrays) {
        const ModuleArg &a = *args[i];
        std::string ai = "args[" + std::to_string(i) + "]";
        bool writable = a.kind == ModuleArg::Kind::Output;
        std::string ct = a.var->type.c_name();
        g.line(std::string(writable ? "" : "const ") + ct + " *__restrict__ " + g.name_of(a.var.get()) +
               " = static_cast<" + (writable ? "" : "const ") + ct + " *>(" + ai + ".data);");
        g.line("const int64_t " + g.name_of(a.count_var.get()) + " = " + ai + ".count;");
    }
    g.visit(body);
    g.line("return 0;");
    g.os << "}\n";
    return g.os.str();
}

} // namespace

std::string emit_function(const std::string &qualifiers, const std::string &symbol, const LoweredFunc &f) {
    CodeGen_C g;
    return emit_function(g, qualifiers, symbol, f);
}

std::string emit_function(CodeGen_C &g, const std::string &qualifiers, const std::string &symbol, const LoweredFunc &f,
                          const std::string &leading_params) {
    std::string extra = leading_params;
    std::vector<std::pair<VarPtr, std::string>> bind;
    for (const VarPtr &out : f.output_arrays) {
        std::string name = c_identifier(out->name);
        extra += out->type.c_name() + " *" + name + ", ";
        bind.emplace_back(out, name);
    }
    return emit_argv_function(g, qualifiers, symbol, arg_list(f), extra, f.body, bind, f.constants);
}

} // namespace cora::ir
