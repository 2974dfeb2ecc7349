/** \file The backend "cuda-emulated"'s printers (CodeGen_Emulated.h): CodeGen_C with the launch
 * and the GPU-bound loops spelled for the CPU. */
#include "codegen/CodeGen_Emulated.h"

#include "codegen/EntryFunction.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The entry: each launch runs every block in turn, calling the kernel's C function. */
class CodeGen_EmulatedHost : public CodeGen_C {
protected:
    using CodeGen_C::visit_node;
    void visit_node(const LaunchKernel *op) override {
        CORA_CHECK(parallel_depth == 0, "codegen: a kernel launch inside a parallel loop");
        auto list = [&](const std::vector<Expr> &v) { return expr(v[0]) + ", " + expr(v[1]) + ", " + expr(v[2]); };
        std::string args;
        for (const VarPtr &a : op->args)
            args += name_of(a.get()) + ", ";
        line("{");
        indent++;
        // The thread counts were checked against the device's limits; the emulated kernel runs
        // each block's thread loops as loops over their extents.
        line("const int64_t cora_grid[3] = {" + list(op->grid) + "};");
        line("for (int64_t cora_bz = 0; cora_bz < cora_grid[2]; ++cora_bz)");
        line("for (int64_t cora_by = 0; cora_by < cora_grid[1]; ++cora_by)");
        line("for (int64_t cora_bx = 0; cora_bx < cora_grid[0]; ++cora_bx) {");
        line("    const int64_t cora_block[3] = {cora_bx, cora_by, cora_bz};");
        line("    " + op->kernel + "(" + args + "cora_block);");
        line("}");
        indent--;
        line("}");
    }
};

/** A kernel's body, run once per block: the block index comes from the array the emulated launch
 * passes; the thread loops and lanes loops run as loops, one phase after another. */
class CodeGen_EmulatedKernel : public CodeGen_C {
protected:
    using CodeGen_C::visit_node;
    std::string gpu_index(ForKind kind) override {
        CORA_CHECK(is_gpu_block(kind), "codegen: emulated thread index");
        return "cora_block[" + std::to_string(gpu_axis(kind)) + "]";
    }
    void visit_node(const For *op) override {
        if (!is_gpu_thread(op->for_kind) && op->for_kind != ForKind::GpuLanes) return CodeGen_C::visit_node(op);
        std::string v = name_of(op->var.get()), mn = expr(op->min), ext = expr(op->extent);
        line("for (int64_t " + v + " = " + mn + "; " + v + " < " + mn + " + " + ext + "; ++" + v + ") {");
        indent++;
        visit(op->body);
        indent--;
        line("}");
    }
};

} // namespace

std::string emulated_kernel_function(const LoweredFunc &kernel) {
    CodeGen_EmulatedKernel g;
    g.exact_bindings = kernel.exact_bindings;
    std::string params;
    for (const std::string &p : kernel_parameters(g, kernel))
        params += p + ", ";
    g.os << "static void " << kernel.name << "(" << params << "const int64_t *cora_block) {\n";
    g.visit(kernel.body);
    g.os << "}\n";
    return g.os.str();
}

std::string codegen_emulated_body(const Module &m, const std::string &symbol) {
    std::string kernels;
    for (const LoweredFunc *k : m.device_kernels())
        kernels += emulated_kernel_function(*k) + "\n";
    CodeGen_EmulatedHost host;
    return kernels + emit_function(host, "extern \"C\" ", symbol, m.entry());
}

} // namespace cora::ir
