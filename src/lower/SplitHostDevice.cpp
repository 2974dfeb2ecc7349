/** \file Pass: host/device split (GPU targets).
 *
 * Does: each outermost loop bound to gpu blocks, with everything inside it, becomes a device
 * kernel — a function of the module (FunctionKind::Device) named `<module>_k<n>` whose parameters
 * are the kernel's free variables (buffers and scalars of the host scope, in order of first use) —
 * and in its place the entry gets a LaunchKernel:
 *  - grid and threads: per axis, the largest extent of the loops bound to it over all blocks. An
 *    extent that depends on block indices (a block per sentence and threads over its tokens; a
 *    block axis over a matrix's tiles inside one over the matrices) is maximised by a host loop
 *    over those blocks, mirroring the lets and guards on the way to the loop (so it reads what the
 *    kernel would read, where the kernel would read it); an extent that depends on another kind of
 *    kernel variable is a CompileError;
 *  - the device's limits (GpuLimits, from the backend: threads per block, block and grid sizes per
 *    axis; every current GPU: 1024, 1024 x 1024 x 64, 2^31-1 x 65535 x 65535): a CompileError
 *    when the sizes are constants, else an Assert before the launch.
 * Each block and thread runs the bound loop's body for its own index when that index is below the
 * loop's extent (the printers write the bound check), so extents smaller than the launch are safe;
 * an axis whose loops all have the launch size as their extent needs no check (LoweredFunc::exact_bindings).
 * Shared memory: in a kernel with thread loops, a tile written outside them (cache_read at a block
 * or serial loop around the thread loops) is the block's: it moves to shared memory (at most the
 * limit's static shared bytes, 48 KiB, in all, else a CompileError) and its copy becomes a GpuLanes loop, shared by the
 * block's threads between two barriers (PlaceSharedTiles; in CUDA, 16 bytes of consecutive elements per lane where
 * the copy's innermost extent allows, an inner vectorized loop the printer makes one 16-byte copy). Checks
 * (CompileError): in a kernel, a block loop inside a thread or serial loop, two loops bound to the same axis one inside
 * the other, and — in a kernel with thread loops — a store to memory outside the kernel (a parameter) that is not
 * inside a thread loop: every thread would run it. A per-thread local (a cache_write tile, a cache_read copy, a scalar)
 * may live outside them. Requires: the final loop kinds (decide_loop_execution; no Parallel loop inside a GPU-bound
 * one), per-op bindings checked (GpuBindings.cpp). Ensures: no GPU-bound loop in the entry; heap allocations and
 * argument checks stay on the host. On the host target it changes nothing. Tests: tests/pass/passes.cpp (the pass
 * alone), tests/correctness/gpu_schedules.cpp. */
#include <map>
#include <set>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The variables and buffers a kernel uses without defining them (its parameters), in order of
 * first use; those it defines; the buffers it stores to. */
class KernelScope : public IRVisitor {
public:
    std::vector<VarPtr> free;
    std::set<const VarNode *> defined;

    using IRVisitor::visit;
    void visit(const Expr &e) override {
        if (e.as<Var>()) {
            use(std::static_pointer_cast<const VarNode>(e.ptr()));
            return;
        }
        IRVisitor::visit(e);
    }

protected:
    using IRVisitor::visit_node;
    void visit_node(const Load *op) override {
        use(op->buffer);
        IRVisitor::visit_node(op);
    }
    void visit_node(const Store *op) override {
        use(op->buffer);
        IRVisitor::visit_node(op);
    }
    void visit_node(const For *op) override {
        visit(op->min);
        visit(op->extent);
        defined.insert(op->var.get());
        visit(op->body);
    }
    void visit_node(const LetStmt *op) override {
        visit(op->value);
        defined.insert(op->var.get());
        visit(op->body);
    }
    void visit_node(const LocalVar *op) override {
        visit(op->init);
        defined.insert(op->var.get());
        visit(op->body);
    }
    void visit_node(const Assign *op) override {
        use(op->var);
        visit(op->value);
    }
    void visit_node(const Allocate *op) override {
        visit(op->size);
        defined.insert(op->buffer.get());
        visit(op->body);
    }

private:
    std::set<const VarNode *> seen_;
    void use(const VarPtr &v) {
        if (!defined.count(v.get()) && seen_.insert(v.get()).second) free.push_back(v);
    }
};

/** The variables (and buffers read) an expression mentions. */
std::set<const VarNode *> mentioned(const Expr &e) {
    std::set<const VarNode *> s;
    visit_exprs(e, [&](const Expr &x) {
        if (const Var *v = x.as<Var>()) s.insert(v);
        if (const Load *l = x.as<Load>()) s.insert(l->buffer.get());
    });
    return s;
}

/** The first of `vars` that `e` mentions, or nullptr. */
const VarNode *first_of(const Expr &e, const std::set<const VarNode *> &vars) {
    for (const VarNode *v : mentioned(e))
        if (vars.count(v)) return v;
    return nullptr;
}

/** Whether `s` stores to `buffer` outside any thread loop (`s` itself being outside them). */
bool stored_outside_threads(const Stmt &s, const VarNode *buffer) {
    class Finder : public IRVisitor {
    public:
        explicit Finder(const VarNode *b) : b_(b) {}
        bool found = false;

    protected:
        using IRVisitor::visit_node;
        void visit_node(const For *op) override {
            if (!is_gpu_thread(op->for_kind)) IRVisitor::visit_node(op);
        }
        void visit_node(const Store *op) override { found = found || (op->buffer.get() == b_); }

    private:
        const VarNode *b_;
    } f(buffer);
    f.visit(s);
    return f.found;
}

bool has_thread_loop(const Stmt &s) {
    bool found = false;
    visit_stmts(s, [&](const Stmt &x) {
        if (const For *f = x.as<For>()) found = found || is_gpu_thread(f->for_kind);
    });
    return found;
}

/** In a kernel with thread loops: a per-thread tile written outside the thread loops — a
 * cache_read copy at a block-level loop — moves to the block's shared memory, and each statement
 * writing it there becomes a GpuLanes loop (its perfect nest of constant-extent loops flattened,
 * so that consecutive threads copy consecutive elements). The CUDA printer puts a barrier before
 * such a loop (nobody still reads the old contents) and after it (everybody sees the new ones). */
class PlaceSharedTiles : public IRMutator {
public:
    explicit PlaceSharedTiles(bool vector_copies) : vector_copies_(vector_copies) {}

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        if (threads_ == 0 && !is_gpu_thread(op->for_kind) && !has_thread_loop(self) && writes_shared(self))
            return lanes(self);
        threads_ += is_gpu_thread(op->for_kind);
        Stmt r = IRMutator::mutate_node(op, self);
        threads_ -= is_gpu_thread(op->for_kind);
        return r;
    }
    Stmt mutate_node(const Store *op, const Stmt &self) override {
        return threads_ == 0 && shared_.count(op->buffer.get()) ? lanes(self) : self;
    }
    Stmt mutate_node(const Allocate *op, const Stmt &self) override {
        if (threads_ > 0 || op->memory != MemoryType::Stack || !stored_outside_threads(op->body, op->buffer.get()))
            return IRMutator::mutate_node(op, self);
        shared_.insert(op->buffer.get());
        return Allocate::make(op->buffer, op->size, mutate(op->body), MemoryType::GpuShared);
    }

private:
    const bool vector_copies_;
    int threads_ = 0;
    std::set<const VarNode *> shared_;

    bool writes_shared(const Stmt &s) const {
        bool w = false;
        visit_stmts(s, [&](const Stmt &x) {
            if (const Store *st = x.as<Store>()) w = w || shared_.count(st->buffer.get());
        });
        return w;
    }
    /** 16 bytes per lane (CUDA): when every store of the copy's body is of one element size, 4 bytes
     * (float32, int32) or 2 (float16 storage), and the innermost loop's extent is a multiple of
     * 16 / size, each lane runs that many consecutive iterations of it (an inner vectorized loop),
     * which the CUDA printer turns into one 16-byte load and store where they are contiguous and
     * aligned (CodeGen_CUDA.cpp). The elements per lane, or 0 for one at a time. */
    int64_t vector_width(const std::vector<const For *> &loops, const Stmt &body) const {
        if (!vector_copies_ || loops.empty()) return 0;
        int bytes = 0;
        bool uniform = true;
        visit_stmts(body, [&](const Stmt &x) {
            if (const Store *st = x.as<Store>()) {
                const int b = st->buffer->type.bytes();
                uniform = uniform && (bytes == 0 || b == bytes);
                bytes = b;
            }
        });
        if (!uniform || (bytes != 2 && bytes != 4)) return 0;
        const int64_t width = 16 / bytes;
        return *as_const_int(loops.back()->extent) % width == 0 ? width : 0;
    }
    Stmt lanes(const Stmt &s) const {
        std::vector<const For *> loops;
        Stmt body = s;
        while (const For *f = body.as<For>()) {
            if (!as_const_int(f->extent) || is_gpu_bound(f->for_kind)) break;
            loops.push_back(f);
            body = f->body;
        }
        VarPtr lane = make_var("lane", VarRole::Index);
        if (loops.empty()) return For::make(lane, IntImm::make(0), IntImm::make(1), ForKind::GpuLanes, s);
        const int64_t width = vector_width(loops, body);
        const bool vector = width > 0;
        VarPtr element = vector ? make_var("v", VarRole::Index) : nullptr;
        std::map<const VarNode *, Expr> at;
        int64_t stride = 1;
        for (size_t k = loops.size(); k-- > 0;) {
            const bool innermost = k + 1 == loops.size();
            int64_t extent = *as_const_int(loops[k]->extent) / (vector && innermost ? width : 1);
            Expr i = Div::make(var_expr(lane), IntImm::make(stride));
            if (k > 0) i = Mod::make(i, IntImm::make(extent));
            if (vector && innermost) i = Add::make(Mul::make(i, IntImm::make(width)), var_expr(element));
            at[loops[k]->var.get()] = simplify(Add::make(loops[k]->min, i));
            stride *= extent;
        }
        Stmt copy = simplify(substitute(body, at));
        if (vector) copy = For::make(element, IntImm::make(0), IntImm::make(width), ForKind::Vectorized, copy);
        return For::make(lane, IntImm::make(0), IntImm::make(stride), ForKind::GpuLanes, copy);
    }
};

/** The GPU-bound loops of a kernel, and its binding rules (see the file comment). */
class KernelChecker : public IRVisitor {
public:
    KernelChecker(const std::string &what, const std::set<const VarNode *> &local, bool has_threads)
        : what_(what), local_(local), has_threads_(has_threads) {}
    std::vector<const For *> bound; ///< every GPU-bound loop, outermost first

protected:
    using IRVisitor::visit_node;
    void visit_node(const For *op) override {
        const ForKind k = op->for_kind;
        CORA_CHECK(k != ForKind::Parallel, "split_host_device: parallel loop ", op->var->name, " in a kernel");
        if (is_gpu_bound(k)) {
            for (const For *outer : enclosing_) {
                if (is_gpu_block(k) && !is_gpu_block(outer->for_kind))
                    throw_compile_error(what_, ": the block loop '", op->var->name, "' (", for_kind_name(k),
                                        ") is inside loop '", outer->var->name, "' (", for_kind_name(outer->for_kind),
                                        "); a kernel's block loops must be outside all its other loops");
                if (outer->for_kind == k)
                    throw_compile_error(what_, ": loop '", op->var->name, "' is bound to ", for_kind_name(k),
                                        " inside loop '", outer->var->name,
                                        "', which is bound to the same axis; bind it to another axis or leave it "
                                        "serial");
            }
            bound.push_back(op);
        }
        if (k == ForKind::GpuLanes)
            for (const For *outer : enclosing_)
                CORA_CHECK(!is_gpu_thread(outer->for_kind), "split_host_device: lanes inside a thread loop");
        const bool per_thread = is_gpu_thread(k) || k == ForKind::GpuLanes;
        enclosing_.push_back(op);
        threads_ += per_thread;
        IRVisitor::visit_node(op);
        threads_ -= per_thread;
        enclosing_.pop_back();
    }
    void visit_node(const Store *op) override {
        if (has_threads_ && threads_ == 0 && !local_.count(op->buffer.get()))
            throw_compile_error(what_, ": the store to '", op->buffer->name,
                                "' is outside the kernel's thread loops, so every thread of a block would run it; "
                                "bind the loops around it with gpu_threads (or compute it in another kernel)");
        IRVisitor::visit_node(op);
    }
    void visit_node(const Allocate *op) override {
        if (op->memory == MemoryType::Heap)
            throw_compile_error(what_, ": '", op->buffer->name,
                                "' needs heap memory inside a kernel; a kernel allocates only per-thread tiles "
                                "of constant size");
        IRVisitor::visit_node(op);
    }
    void visit_node(const Assert *) override { internal_failure(what_, ": an argument check inside a kernel"); }

private:
    std::string what_;
    const std::set<const VarNode *> &local_;
    bool has_threads_;
    std::vector<const For *> enclosing_;
    int threads_ = 0;
};

/** Host statements setting `acc` to the largest extent of the `kind` loops of a kernel (a block or
 * thread axis): a loop over each block loop on the way (same variable, same extent), its lets and
 * guards, and at each bound loop `acc = max(acc, extent)`. A variable of the kernel that is not
 * mirrored (a serial or thread loop, a let that depends on one) in an extent is a CompileError. */
class LaunchExtentMax {
public:
    LaunchExtentMax(const std::string &what, const std::set<const VarNode *> &kernel_vars, ForKind kind,
                    const VarPtr &acc)
        : what_(what), kernel_vars_(kernel_vars), kind_(kind), acc_(acc) {}

    Stmt build(const Stmt &s) {
        if (const For *op = s.as<For>()) {
            if (op->for_kind == kind_) {
                if (const VarNode *v = unavailable(op->extent))
                    throw_compile_error(what_, ": the loop '", op->var->name, "' (", for_kind_name(kind_),
                                        ") has extent ", print(op->extent), ", which depends on '", v->name,
                                        "', not a block index; a launch's size must be known before it "
                                        "(split the loop by a constant and bind the inner one)");
                return Assign::make(acc_, Max::make(var_expr(acc_), op->extent));
            }
            if (is_gpu_block(op->for_kind) && !unavailable(op->min) && !unavailable(op->extent)) {
                // (A block loop inside it is bound to another axis: each block runs for the max.)
                available_.insert(op->var.get());
                Stmt b = build(op->body);
                return b.defined() ? For::make(op->var, op->min, op->extent, ForKind::Serial, b) : Stmt();
            }
            return build(op->body);
        }
        if (const LetStmt *op = s.as<LetStmt>()) {
            if (unavailable(op->value)) return build(op->body);
            available_.insert(op->var.get());
            Stmt b = build(op->body);
            return b.defined() ? LetStmt::make(op->var, op->value, b) : Stmt();
        }
        if (const IfThenElse *op = s.as<IfThenElse>()) {
            Stmt t = build(op->then_case), e = op->else_case.defined() ? build(op->else_case) : Stmt();
            if (!t.defined() && !e.defined()) return Stmt();
            // A guard the host cannot evaluate is dropped: the maximum is then over more
            // iterations, an upper bound (extra threads do nothing).
            if (unavailable(op->cond)) return Block::make({t, e});
            return IfThenElse::make(op->cond, t.defined() ? t : Block::make({}), e);
        }
        if (const Block *op = s.as<Block>()) {
            std::vector<Stmt> v;
            for (const Stmt &x : op->stmts)
                v.push_back(build(x));
            return Block::make(v);
        }
        if (const Allocate *op = s.as<Allocate>()) return build(op->body);
        if (const LocalVar *op = s.as<LocalVar>()) return build(op->body);
        return Stmt();
    }

private:
    std::string what_;
    const std::set<const VarNode *> &kernel_vars_;
    ForKind kind_;
    VarPtr acc_;
    std::set<const VarNode *> available_; ///< kernel variables the host mirrors

    const VarNode *unavailable(const Expr &e) const {
        for (const VarNode *v : mentioned(e))
            if (kernel_vars_.count(v) && !available_.count(v)) return v;
        return nullptr;
    }
};

class SplitHostDevice : public IRMutator {
public:
    SplitHostDevice(const std::string &prefix, const GpuLimits &limits, std::vector<LoweredFunc> &kernels,
                    bool vector_copies)
        : prefix_(prefix), limits_(limits), kernels_(kernels), vector_copies_(vector_copies) {}

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        CORA_CHECK(!is_gpu_thread(op->for_kind), "split_host_device: thread loop ", op->var->name,
                   " outside any block loop");
        if (!is_gpu_block(op->for_kind)) return IRMutator::mutate_node(op, self);
        return make_kernel(self);
    }

private:
    std::string prefix_;
    const GpuLimits &limits_;
    std::vector<LoweredFunc> &kernels_;
    const bool vector_copies_;

    Stmt make_kernel(const Stmt &bound_nest) {
        const std::string name = prefix_ + "_k" + std::to_string(kernels_.size());
        PlaceSharedTiles shared(vector_copies_);
        const Stmt nest = has_thread_loop(bound_nest) ? shared.mutate(bound_nest) : bound_nest;
        KernelScope scope;
        scope.visit(nest);
        std::string writes;
        visit_stmts(nest, [&](const Stmt &s) {
            if (const Store *st = s.as<Store>())
                if (!scope.defined.count(st->buffer.get()) &&
                    writes.find("'" + st->buffer->name + "'") == std::string::npos)
                    writes += std::string(writes.empty() ? "" : ", ") + "'" + st->buffer->name + "'";
        });
        const std::string what = "kernel " + name + " (writing " + (writes.empty() ? "nothing" : writes) + ")";
        bool has_threads = false;
        visit_stmts(nest, [&](const Stmt &s) {
            if (const For *f = s.as<For>()) has_threads = has_threads || is_gpu_thread(f->for_kind);
        });
        KernelChecker check(what, scope.defined, has_threads);
        check.visit(nest);
        // Every shared array of the kernel: the tiles placed above and the parts of cross-thread
        // reductions (ThreadReductions.cpp).
        int64_t shared_bytes = 0;
        std::string shared_names;
        visit_stmts(nest, [&](const Stmt &x) {
            const Allocate *a = x.as<Allocate>();
            if (!a || a->memory != MemoryType::GpuShared) return;
            const int64_t *n = as_const_int(a->size);
            CORA_CHECK(n != nullptr, "split_host_device: a shared array of non-constant size");
            shared_bytes += *n * a->buffer->type.bytes();
            shared_names += std::string(shared_names.empty() ? "" : ", ") + "'" + a->buffer->name + "'";
        });
        if (shared_bytes > limits_.max_static_shared_bytes)
            throw_compile_error(what, ": its shared-memory tiles (", shared_names, ") take ", shared_bytes,
                                " bytes, more than the ", limits_.max_static_shared_bytes,
                                " a block may use; cache smaller tiles (split the loops they are cached at)");

        std::vector<Expr> grid(3), threads(3);
        std::vector<ForKind> exact;
        std::vector<Stmt> host;     // computing the thread extents, then the checks
        std::vector<VarPtr> locals; // the thread-extent accumulators
        for (int axis = 0; axis < 3; axis++) {
            std::vector<const For *> blocks, thread_loops;
            for (const For *f : check.bound)
                if (gpu_axis(f->for_kind) == axis) (is_gpu_block(f->for_kind) ? blocks : thread_loops).push_back(f);
            // The launch size of each axis: the largest extent of the loops bound to it; an extent
            // that depends on block indices (a ragged inner block axis, a thread count per
            // sentence) is maximised by a host loop over those blocks.
            auto launch_size = [&](const std::vector<const For *> &loops, ForKind kind, const char *what_axis) {
                if (loops.empty()) return Expr(IntImm::make(1));
                Expr size;
                bool host_known = true;
                for (const For *f : loops) {
                    host_known = host_known && !first_of(f->extent, scope.defined);
                    size = size.defined() ? Max::make(size, f->extent) : f->extent;
                }
                if (host_known) {
                    // Exact: every loop bound to the axis runs to the launch size (one loop, or the
                    // init, update and write-back loops of one tile, all over the same extent).
                    bool same = true;
                    for (const For *f : loops)
                        same = same && equal(simplify(f->extent), simplify(loops[0]->extent));
                    if (same) exact.push_back(kind);
                    return simplify(size);
                }
                VarPtr acc = make_var(name + "_" + what_axis + "_" + "xyz"[gpu_axis(kind)], VarRole::Local);
                host.push_back(simplify(LaunchExtentMax(what, scope.defined, kind, acc).build(nest)));
                locals.push_back(acc);
                return var_expr(acc);
            };
            grid[axis] = launch_size(blocks, ForKind(int(ForKind::GpuBlockX) + axis), "blocks");
            threads[axis] = launch_size(thread_loops, ForKind(int(ForKind::GpuThreadX) + axis), "threads");
        }
        check_limits(what, grid, threads, host);

        LoweredFunc kernel{FunctionKind::Device, {}, {}, nest, name, scope.free, exact, {}};
        kernels_.push_back(kernel);
        host.push_back(LaunchKernel::make(name, grid, threads, scope.free));
        Stmt s = Block::make(host);
        for (size_t i = locals.size(); i-- > 0;)
            s = LocalVar::make(locals[i], IntImm::make(1), s);
        return s;
    }

    /** The device's launch limits: CompileErrors for constants, Asserts before the launch otherwise. */
    void check_limits(const std::string &what, const std::vector<Expr> &grid, const std::vector<Expr> &threads,
                      std::vector<Stmt> &host) const {
        Expr per_block = simplify(Mul::make(Mul::make(threads[0], threads[1]), threads[2]));
        auto limit = [&](const Expr &value, int64_t max, const std::string &text) {
            if (const int64_t *c = as_const_int(value)) {
                if (*c > max)
                    throw_compile_error(what, ": ", *c, " ", text, ", more than the ", max,
                                        " the device allows; split the loop and bind the outer part elsewhere");
                return;
            }
            host.push_back(Assert::make(
                LE::make(value, IntImm::make(max)),
                {what + ": ", " " + text + ", more than the " + std::to_string(max) + " the device allows"}, {value}));
        };
        limit(per_block, limits_.max_threads_per_block, "threads per block");
        const char *axis[3] = {"x", "y", "z"};
        for (int i = 0; i < 3; i++) {
            limit(grid[(size_t)i], limits_.max_grid[i], std::string("blocks in ") + axis[i]);
            limit(threads[(size_t)i], limits_.max_block[i], std::string("threads in ") + axis[i]);
        }
    }
};

} // namespace

Stmt split_host_device(const Stmt &s, const std::string &kernel_prefix, Target target, const GpuLimits &limits,
                       bool vector_copies, std::vector<LoweredFunc> &kernels) {
    if (!is_gpu(target)) return s;
    return SplitHostDevice(kernel_prefix, limits, kernels, vector_copies && target == Target::Cuda).mutate(s);
}

} // namespace cora::ir
