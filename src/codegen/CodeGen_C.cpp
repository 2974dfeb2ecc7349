/** \file The C++ printer (CodeGen_C.h). */
#include "codegen/CodeGen_C.h"
#include "codegen/IndexTerms.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "analysis/Simplify.h"
#include "codegen/CRuntime.h"
#include "cora_runtime.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

std::string CodeGen_C::name_of(const VarNode *v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string base;
    for (char c : v->name)
        base += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
    if (base.empty() || std::isdigit((unsigned char)base[0])) base = "v_" + base;
    base += "_"; // never collides with a C/C++ keyword or the ABI's own names
    std::string n = base;
    for (int k = 2; used_.count(n); k++)
        n = base + std::to_string(k);
    used_.insert(n);
    names_[v] = n;
    return n;
}

std::string CodeGen_C::expr(const Expr &e) {
    std::ostringstream tmp;
    std::swap(tmp, os);
    visit(e);
    std::swap(tmp, os);
    return tmp.str();
}

void CodeGen_C::line(const std::string &s) { os << std::string(indent * 4, ' ') << s << "\n"; }

std::string CodeGen_C::release_live_allocations() const {
    std::string release;
    for (const std::string &live : live_allocations_)
        release += " " + live;
    return release;
}

void CodeGen_C::bin(const Expr &a, const char *op, const Expr &b) {
    os << "(" << expr(a) << " " << op << " " << expr(b) << ")";
}

void CodeGen_C::arith(Type t, const Expr &a, const char *op, const char *checked_fn, const Expr &b) {
    if (checked_ > 0 && t.is_int() && !t.is_bool())
        os << checked_fn << "<" << t.c_name() << ">(" << expr(a) << ", " << expr(b) << ", cora_ov)";
    else
        bin(a, op, b);
}

void CodeGen_C::visit_node(const IntImm *op) {
    if (op->type.is_bool())
        os << (op->value ? "true" : "false");
    else if (op->type.bits == 32)
        os << "int32_t(" << op->value << ")";
    else if (op->value == INT64_MIN)
        os << "INT64_MIN";
    else
        os << scalar_type(op->type) << "(" << op->value << ")";
}

void CodeGen_C::visit_node(const FloatImm *op) {
    bool f32 = op->type.bits == 32;
    if (std::isinf(op->value)) {
        os << (op->value < 0 ? "-" : "") << (f32 ? "INFINITY" : "double(INFINITY)");
        return;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", op->value);
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    os << (f32 ? "float(" + s + ")" : "double(" + s + ")");
}

void CodeGen_C::visit_node(const Var *op) { os << name_of(op); }

void CodeGen_C::visit_node(const Add *op) { arith(op->type, op->a, "+", "cora_add_ck", op->b); }

void CodeGen_C::visit_node(const Sub *op) { arith(op->type, op->a, "-", "cora_sub_ck", op->b); }

void CodeGen_C::visit_node(const Mul *op) { arith(op->type, op->a, "*", "cora_mul_ck", op->b); }

void CodeGen_C::visit_node(const Div *op) {
    if (op->type.is_int())
        os << "cora_div(" << expr(op->a) << ", " << expr(op->b) << ")";
    else
        bin(op->a, "/", op->b);
}

void CodeGen_C::visit_node(const Mod *op) {
    if (op->type.is_int()) {
        os << "cora_mod(" << expr(op->a) << ", " << expr(op->b) << ")";
    } else {
        std::string a = expr(op->a), b = expr(op->b);
        os << "(" << a << " - " << b << " * std::floor(" << a << " / " << b << "))";
    }
}

void CodeGen_C::visit_node(const Min *op) {
    if (op->type.is_float())
        os << "std::fmin(" << expr(op->a) << ", " << expr(op->b) << ")";
    else
        os << "std::min<" << scalar_type(op->type) << ">(" << expr(op->a) << ", " << expr(op->b) << ")";
}

void CodeGen_C::visit_node(const Max *op) {
    if (op->type.is_float())
        os << "std::fmax(" << expr(op->a) << ", " << expr(op->b) << ")";
    else
        os << "std::max<" << scalar_type(op->type) << ">(" << expr(op->a) << ", " << expr(op->b) << ")";
}

void CodeGen_C::visit_node(const EQ *op) { bin(op->a, "==", op->b); }

void CodeGen_C::visit_node(const NE *op) { bin(op->a, "!=", op->b); }

void CodeGen_C::visit_node(const LT *op) { bin(op->a, "<", op->b); }

void CodeGen_C::visit_node(const LE *op) { bin(op->a, "<=", op->b); }

void CodeGen_C::visit_node(const GT *op) { bin(op->a, ">", op->b); }

void CodeGen_C::visit_node(const GE *op) { bin(op->a, ">=", op->b); }

void CodeGen_C::visit_node(const And *op) { bin(op->a, "&&", op->b); }

void CodeGen_C::visit_node(const Or *op) { bin(op->a, "||", op->b); }

void CodeGen_C::visit_node(const Not *op) { os << "(!" << expr(op->a) << ")"; }

void CodeGen_C::visit_node(const Select *op) {
    os << "(" << expr(op->cond) << " ? " << expr(op->t) << " : " << expr(op->f) << ")";
}

void CodeGen_C::visit_node(const Cast *op) { os << scalar_type(op->type) << "(" << expr(op->value) << ")"; }

void CodeGen_C::visit_node(const Call *op) {
    if ((op->name == "exp" || op->name == "erf") && op->type == Float32) { // inline: loops over it vectorize
        os << "cora_" << op->name << "f(" << expr(op->args[0]) << ")";
        return;
    }
    std::string fn = op->name == "abs" ? "fabs" : op->name;
    os << "std::" << fn << "(" << expr(op->args[0]) << ")";
}

void CodeGen_C::visit_node(const UFCall *op) {
    throw InternalError("codegen: uninterpreted function " + op->fn->name + " was not materialized");
}

void CodeGen_C::visit_node(const Access *op) {
    throw InternalError("codegen: tensor access " + op->tensor->name + " was not lowered");
}

void CodeGen_C::visit_node(const Load *op) {
    std::string element = name_of(op->buffer.get()) + "[" + index_expr(op->index) + "]";
    // float16 storage is uint16_t bits: a read widens to float (cora_runtime.h, or cvt on a GPU).
    os << (op->buffer->type.is_storage_only() ? "cora_half_to_float(" + element + ")" : element);
}

void CodeGen_C::visit_node(const Reduce *) { throw InternalError("codegen: reduction was not lowered"); }

std::string CodeGen_C::gpu_index(ForKind kind) {
    throw InternalError(std::string("codegen: a loop bound to ") + for_kind_name(kind) + " outside a device kernel");
}

std::string CodeGen_C::index_expr(const Expr &index) {
    return expr(order_index_terms(index, [&](const VarNode *v) {
        auto it = scope_depth_.find(v);
        return it == scope_depth_.end() ? 0 : it->second;
    }));
}

void CodeGen_C::visit_node(const For *op) {
    // The loop's variable is at one level deeper than the code around it, until the loop ends.
    struct LoopScope {
        CodeGen_C &g;
        const VarNode *v;
        LoopScope(CodeGen_C &gen, const VarNode *var) : g(gen), v(var) { g.scope_depth_[v] = ++g.loop_depth_; }
        ~LoopScope() {
            g.scope_depth_.erase(v);
            --g.loop_depth_;
        }
    } scope(*this, op->var.get());
    if (is_gpu_bound(op->for_kind)) {
        // One index per block or thread; those past this loop's extent (the launch covers the
        // largest extent of the loops bound to the axis) skip the body.
        std::string index = gpu_index(op->for_kind);
        bool exact = std::find(exact_bindings.begin(), exact_bindings.end(), op->for_kind) != exact_bindings.end();
        line("{");
        indent++;
        line("const " + scalar_type(op->var->type) + " " + name_of(op->var.get()) + " = " + expr(op->min) + " + " +
             index + ";");
        // A body that does not read the index (a tile's zeroing, once sliced per thread; a
        // tensor-core tile, whose fragments read it elsewhere) would draw an unused warning.
        bool used = false;
        visit_exprs(op->body, [&](const Expr &e) { used = used || e.get() == op->var.get(); });
        if (!used) line("(void)" + name_of(op->var.get()) + ";");
        if (!exact) {
            line("if (" + index + " < " + expr(op->extent) + ") {");
            indent++;
        }
        visit(op->body);
        if (!exact) {
            indent--;
            line("}");
        }
        indent--;
        line("}");
        return;
    }
    CORA_CHECK(op->for_kind != ForKind::GpuLanes, "codegen: a gpu_lanes loop outside a device kernel");
    if (op->for_kind == ForKind::Vectorized && emit_vector_loop(op)) return;
    std::string v = name_of(op->var.get());
    std::string ext = expr(op->extent), mn = expr(op->min);
    bool par = op->for_kind == ForKind::Parallel;
    CORA_CHECK(!par || (parallel_depth == 0 && simd_depth == 0), "codegen: parallel loop ", op->var->name,
               " nested in a parallel or simd loop (decide_loop_execution)");
    // OpenMP allows no simd construct inside another: an inner vectorized loop that is not one
    // vector statement prints as a plain loop.
    bool simd = op->for_kind == ForKind::Vectorized && simd_depth == 0;
    // Heap allocations inside a parallel loop (a compute_at producer's slice per iteration):
    // each thread keeps a scratch block for the whole loop, grown when an iteration needs more,
    // taken from and given back to the site's workspace once (CRuntime.cpp), so iterations take
    // no lock, no atomic and no allocator call.
    std::vector<const Allocate *> scratch;
    if (par)
        visit_stmts(op->body, [&](const Stmt &s) {
            if (const Allocate *a = s.as<Allocate>(); a && a->memory == MemoryType::Heap) scratch.push_back(a);
        });
    if (!scratch.empty()) {
        parallel_failure_flag_ = "cora_failed_" + v;
        parallel_allocations_.clear();
        line("int " + parallel_failure_flag_ + " = 0;");
        line("{");
        indent++;
        for (const Allocate *a : scratch)
            line("static CoraWorkspace " + name_of(a->buffer.get()) + "ws;");
        line("#pragma omp parallel num_threads(cora_threads())");
        line("{");
        indent++;
        for (const Allocate *a : scratch)
            line("CoraScratch " + name_of(a->buffer.get()) + "scratch;");
    }
    if (par) {
        // A dynamic split takes chunks of about 1/16 of a thread's share (one at a time for short
        // loops, so that longest-first orders keep their effect; many short rows, as in a ragged
        // copy, do not queue on the shared counter one by one).
        const std::string construct = scratch.empty() ? "parallel for" : "for";
        const std::string threads = scratch.empty() ? " num_threads(cora_threads())" : "";
        line(op->work_split == WorkSplit::Dynamic
                 ? "#pragma omp " + construct + " schedule(dynamic, cora_chunk(" + ext + "))" + threads
                 : "#pragma omp " + construct + " schedule(static)" + threads);
    } else if (simd) {
        line("#pragma omp simd");
    } else if (op->for_kind == ForKind::Unrolled) {
        line("#pragma unroll");
    }
    if (par || simd || (as_const_int(op->min) && as_const_int(op->extent))) {
        // OpenMP's canonical loop form (it evaluates the bound once itself), or constant bounds.
        line("for (" + scalar_type(op->var->type) + " " + v + " = " + mn + "; " + v + " < " + mn + " + " + ext +
             "; ++" + v + ") {");
    } else {
        // The bound evaluated once, as the IR means it: a bound that reads memory (a length, an
        // offset) is otherwise reloaded after every store the C compiler cannot separate from
        // it, and a loop without a known trip count is not vectorized (softmax's exp pass).
        const std::string end = "cora_end_" + v;
        line("for (" + scalar_type(op->var->type) + " " + v + " = " + mn + ", " + end + " = " + mn + " + " + ext +
             "; " + v + " < " + end + "; ++" + v + ") {");
    }
    indent++;
    if (par) parallel_depth++;
    if (simd) simd_depth++;
    visit(op->body);
    if (simd) simd_depth--;
    if (par) parallel_depth--;
    indent--;
    line("}");
    if (!scratch.empty()) {
        for (const Allocate *a : scratch) {
            std::string b = name_of(a->buffer.get());
            line("cora_scratch_release(" + b + "scratch, " + b + "ws);");
        }
        indent--;
        line("}");
        indent--;
        line("}");
        std::string names;
        for (const std::string &n : parallel_allocations_)
            names += "\"" + c_escape(n, true) + "\", ";
        line("if (" + parallel_failure_flag_ + ") {");
        line("    static const char *const cora_names[] = {" + names + "};");
        line("    std::snprintf(error, error_size, \"cannot allocate an iteration's slice of '%s'\", cora_names[" +
             parallel_failure_flag_ + " - 1]);" + release_live_allocations());
        line("    return 2;");
        line("}");
        parallel_failure_flag_.clear();
    }
}

void CodeGen_C::visit_node(const Provide *op) {
    throw InternalError("codegen: Provide to " + op->tensor->name + " was not lowered");
}

void CodeGen_C::visit_node(const Store *op) {
    std::string value = expr(op->value);
    if (op->buffer->type.is_storage_only()) {
        // A copy between float16 buffers (a shared-memory tile's fill) moves the bits, a constant
        // is converted here, any other value is rounded to nearest even when it is stored.
        const Load *copy = op->value.as<Load>();
        if (copy && copy->buffer->type == op->buffer->type)
            value = name_of(copy->buffer.get()) + "[" + index_expr(copy->index) + "]";
        else if (const FloatImm *c = op->value.as<FloatImm>())
            value = "(uint16_t)" + std::to_string(cora_float_to_half((float)c->value));
        else
            value = "cora_float_to_half(" + value + ")";
    }
    line(name_of(op->buffer.get()) + "[" + index_expr(op->index) + "] = " + value + ";");
}

void CodeGen_C::visit_node(const IfThenElse *op) {
    line("if (" + expr(op->cond) + ") {");
    indent++;
    visit(op->then_case);
    indent--;
    if (op->else_case.defined()) {
        line("} else {");
        indent++;
        visit(op->else_case);
        indent--;
    }
    line("}");
}

void CodeGen_C::scoped(const std::string &declaration, const Stmt &body) {
    line("{");
    indent++;
    line(declaration);
    visit(body);
    indent--;
    line("}");
}

void CodeGen_C::visit_node(const LetStmt *op) {
    scope_depth_[op->var.get()] = loop_depth_; // invariant in the loops inside it
    scoped("const " + scalar_type(op->var->type) + " " + name_of(op->var.get()) + " = " + expr(op->value) + ";",
           op->body);
}

void CodeGen_C::visit_node(const LocalVar *op) {
    scope_depth_[op->var.get()] = loop_depth_;
    scoped(scalar_type(op->var->type) + " " + name_of(op->var.get()) + " = " + expr(op->init) + ";", op->body);
}

void CodeGen_C::visit_node(const Assign *op) { line(name_of(op->var.get()) + " = " + expr(op->value) + ";"); }

void CodeGen_C::visit_node(const Allocate *op) {
    std::string b = name_of(op->buffer.get()), t = op->buffer->type.c_name();
    line("{");
    indent++;
    if (op->memory == MemoryType::Stack || op->memory == MemoryType::GpuShared) {
        // A per-tile cache: small and constant-sized, so the C compiler can keep it in
        // registers once the loops over it are unrolled or vectorized.
        line("alignas(64) " + t + " " + b + "[" + expr(op->size) + "];");
        visit(op->body);
        indent--;
        line("}");
        return;
    }
    // The size is overflow-checked, and so is its byte count: the allocator never gets a wrapped
    // size. The block comes from this site's workspace (kept between calls: CRuntime.cpp); in a
    // parallel loop, from the thread's scratch block (declared with the loop).
    if (parallel_depth == 0) line("static CoraWorkspace " + b + "ws;");
    line("bool cora_ov = false;");
    checked_++;
    line("const int64_t " + b + "size = std::max<int64_t>(" + expr(op->size) + ", 1);");
    checked_--;
    line("cora_ov |= " + b + "size > (int64_t)(INT64_MAX / sizeof(" + t + "));");
    const std::string get = parallel_depth > 0 ? "cora_scratch_reserve(" + b + "scratch, " : "cora_workspace_acquire(";
    line(t + " *__restrict__ " + b + " = cora_ov ? nullptr : static_cast<" + t + " *>(" + get + b + "ws, sizeof(" + t +
         ") * (size_t)" + b + "size));");
    if (parallel_depth > 0) {
        // In an iteration of a parallel loop: a failure skips the body and is reported after the
        // loop, which cannot be left by a return.
        CORA_CHECK(!parallel_failure_flag_.empty(), "codegen: an allocation in a parallel loop without its flag");
        parallel_allocations_.push_back(op->buffer->name);
        line("if (!" + b + ") {");
        line("#pragma omp atomic write");
        line("    " + parallel_failure_flag_ + " = " + std::to_string(parallel_allocations_.size()) + ";");
        line("} else {");
        indent++;
        visit(op->body);
        indent--;
        line("}");
        indent--;
        line("}");
        return;
    }
    std::string release = release_live_allocations(); // on failure, give back what the enclosing ones hold
    line("if (!" + b + ") { std::snprintf(error, error_size, \"cannot allocate %lld elements for '" +
         c_escape(op->buffer->name, true) + "'%s\", (long long)" + b +
         "size, cora_ov ? \" (size overflows)\" : \"\");" + release + " return 2; }");
    live_allocations_.push_back("cora_workspace_release(" + b + "ws, " + b + ");");
    visit(op->body);
    live_allocations_.pop_back();
    line("cora_workspace_release(" + b + "ws, " + b + ");");
    indent--;
    line("}");
}

void CodeGen_C::visit_node(const Assert *op) {
    CORA_CHECK(parallel_depth == 0, "argument check inside a parallel loop");
    checked_++;
    std::string fmt, args;
    for (size_t i = 0; i < op->values.size(); i++) {
        fmt += c_escape(op->text[i], true);
        const Expr &v = op->values[i];
        if (v.type().is_float()) {
            fmt += "%g";
            args += ", (double)(" + expr(v) + ")";
        } else {
            fmt += "%lld";
            args += ", (long long)(" + expr(v) + ")";
        }
    }
    fmt += c_escape(op->text.back(), true);
    std::string cond = expr(op->cond);
    checked_--;
    std::string release = release_live_allocations(); // e.g. the permutation check's scratch
    // The condition's + - * are overflow-checked: a size computed from huge params or lengths
    // that wraps around fails here instead of matching a wrapped buffer count.
    std::string overflow = "an argument check overflows 64-bit integers (the params, lengths or counts are too "
                           "large): " +
                           c_escape(print(op->cond), false) + " while checking: " + c_escape(op->text[0], false) +
                           "...";
    line("{");
    line("    bool cora_ov = false;");
    line("    if (!(" + cond + ") || cora_ov) {");
    line("        if (cora_ov) std::snprintf(error, error_size, \"%s\", \"" + overflow + "\");");
    line("        else std::snprintf(error, error_size, \"" + fmt + "\"" + args + ");" + release);
    line("        return 1;");
    line("    }");
    line("}");
}

bool CodeGen_C::emit_vector_loop(const For *op) {
    const int64_t *w = as_const_int(op->extent);
    // GCC's vector extension takes power-of-two lane counts only (a row of 20: an `omp simd` loop).
    if (!w || *w < 2 || *w > 64 || (*w & (*w - 1)) != 0) return false;
    std::map<const VarNode *, Expr> lets;
    Stmt body = op->body;
    while (const LetStmt *l = body.as<LetStmt>()) {
        lets[l->var.get()] = substitute(l->value, lets);
        body = l->body;
    }
    const Store *st = body.as<Store>();
    if (!st) return false;
    Type t = st->buffer->type;
    if (t.bits < 32 || t.bytes() * *w > 256) return false;
    const VarNode *i = op->var.get();
    // Index e = base + (i - min) exactly: its step in i is 1.
    auto contiguous_base = [&](const Expr &e) -> std::optional<Expr> {
        Expr step = simplify(Sub::make(substitute(e, i, Add::make(var_expr(op->var), IntImm::make(1))), e));
        const int64_t *k = as_const_int(step);
        if (!k || *k != 1) return std::nullopt;
        return simplify(substitute(e, i, op->min));
    };
    std::string vt = "cora_v" + std::to_string(*w) + "_" + t.c_name();
    std::function<std::optional<std::string>(const Expr &)> vec = [&](const Expr &e) -> std::optional<std::string> {
        if (!uses_var(e, i)) return "cora_splat<" + vt + ">(" + expr(e) + ")";
        if (e.type() != t) return std::nullopt;
        if (const Load *ld = e.as<Load>()) {
            if (ld->buffer->type != t) return std::nullopt; // float16 storage widens element by element
            auto base = contiguous_base(ld->index);
            if (!base) return std::nullopt;
            return "cora_vload<" + vt + ">(&" + name_of(ld->buffer.get()) + "[" + index_expr(*base) + "])";
        }
        auto binary = [&](const Expr &a, const char *o, const Expr &b) -> std::optional<std::string> {
            // A side that does not use i stays scalar: the vector extension broadcasts it.
            auto side = [&](const Expr &x) { return uses_var(x, i) ? vec(x) : std::optional(expr(x)); };
            auto va = side(a), vb = side(b);
            if (!va || !vb) return std::nullopt;
            return "(" + *va + " " + o + " " + *vb + ")";
        };
        if (const Add *a = e.as<Add>()) return binary(a->a, "+", a->b);
        if (const Sub *a = e.as<Sub>()) return binary(a->a, "-", a->b);
        if (const Mul *a = e.as<Mul>()) return binary(a->a, "*", a->b);
        if (const Div *a = e.as<Div>(); a && t.is_float()) return binary(a->a, "/", a->b);
        if (e.as<Max>() || e.as<Min>()) {
            if (!t.is_float()) return std::nullopt;
            const Expr &a = e.as<Max>() ? e.as<Max>()->a : e.as<Min>()->a;
            const Expr &b = e.as<Max>() ? e.as<Max>()->b : e.as<Min>()->b;
            auto va = vec(a), vb = vec(b); // a side that does not use i is splat
            if (!va || !vb) return std::nullopt;
            return std::string(e.as<Max>() ? "cora_vfmax(" : "cora_vfmin(") + *va + ", " + *vb + ")";
        }
        return std::nullopt;
    };
    Expr index = substitute(st->index, lets), value = substitute(st->value, lets);
    auto base = contiguous_base(index);
    if (!base) return false;
    auto v = vec(value);
    if (!v) return false;
    line("{");
    indent++;
    line("typedef " + t.c_name() + " " + vt + " __attribute__((vector_size(" + std::to_string(t.bytes() * *w) + ")));");
    line("cora_vstore(&" + name_of(st->buffer.get()) + "[" + index_expr(*base) + "], " + *v + ");");
    indent--;
    line("}");
    return true;
}

void CodeGen_C::visit_node(const LaunchKernel *op) {
    throw InternalError("codegen: a launch of kernel '" + op->kernel +
                        "' in host code printed for the CPU alone (the emulator's printer, CodeGen_Emulated, "
                        "prints launches)");
}

namespace {

/** Whether the kernel stores to `buffer` (its parameter is then writable). */
bool stores_to(const Stmt &body, const VarNode *buffer) {
    bool found = false;
    class Finder : public IRVisitor {
    public:
        Finder(const VarNode *b, bool &f) : b_(b), f_(f) {}

    protected:
        using IRVisitor::visit_node;
        void visit_node(const Store *op) override {
            f_ = f_ || op->buffer.get() == b_;
            IRVisitor::visit_node(op);
        }

    private:
        const VarNode *b_;
        bool &f_;
    } finder(buffer, found);
    finder.visit(body);
    return found;
}

} // namespace

std::vector<std::string> kernel_parameters(CodeGen_C &g, const LoweredFunc &kernel) {
    std::vector<std::string> params;
    for (const VarPtr &p : kernel.params) {
        std::string t = p->type.c_name();
        if (p->role == VarRole::Buffer)
            params.push_back((stores_to(kernel.body, p.get()) ? "" : "const ") + t + " *__restrict__ " +
                             g.name_of(p.get()));
        else
            params.push_back("const " + t + " " + g.name_of(p.get()));
    }
    return params;
}

std::string entry_symbol(const Module &m) { return "cora_" + c_identifier(m.name); }

} // namespace cora::ir
