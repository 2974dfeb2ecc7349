/** \file Statement execution for the Interpreter (Interpreter::exec). It exists so that the host
 * prelude runs the same aux-array builders that AOT kernels compile (AuxKind::build): one
 * definition per kind, so the JIT path (arrays from the RaggedShape) and the AOT path (arrays
 * built inside the kernel) cannot disagree. It covers the statements builders are made of —
 * integer scalars and buffers; tensor stores (Provide) and floating-point memory stay with the
 * compiled kernels. */
#include <optional>

#include "analysis/Interpreter.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Binds `var` in `map` for one scope and restores what it shadowed when the scope ends (also
 * when the body throws, so an interpreter stays usable after a failed Assert). */
template <typename Map> class ScopedBinding {
public:
    ScopedBinding(Map &map, const VarNode *var, typename Map::mapped_type value) : map_(map), var_(var) {
        auto it = map_.find(var);
        if (it != map_.end()) saved_ = it->second;
        map_[var] = value;
    }
    ~ScopedBinding() {
        if (saved_)
            map_[var_] = *saved_;
        else
            map_.erase(var_);
    }
    ScopedBinding(const ScopedBinding &) = delete;
    ScopedBinding &operator=(const ScopedBinding &) = delete;

private:
    Map &map_;
    const VarNode *var_;
    std::optional<typename Map::mapped_type> saved_;
};

[[noreturn]] void cannot_run(const Stmt &s, const char *why) {
    throw InternalError(concat("interpreter: cannot run ", print(s), ": ", why));
}

/** The scalar variables an integer statement may bind: int and bool (stored as 0/1). */
void require_integer_var(const Stmt &s, const VarPtr &v) {
    if (v->type.is_float()) cannot_run(s, "floating-point scalars are not supported");
}

} // namespace

void Interpreter::exec_scoped(const Stmt &s, const VarPtr &var, const Expr &value, const Stmt &body) {
    require_integer_var(s, var);
    ScopedBinding bind(ints, var.get(), eval_int(value));
    exec(body);
}

void Interpreter::exec(const Stmt &s) {
    if (!s.defined()) return;
    switch (s.get()->kind) {
    case NodeKind::Block:
        for (const Stmt &x : s.as<Block>()->stmts)
            exec(x);
        return;
    case NodeKind::For: {
        const For *f = s.as<For>();
        int64_t lo = eval_int(f->min), n = eval_int(f->extent), hi;
        if (__builtin_add_overflow(lo, n, &hi))
            throw RuntimeError(concat("integer overflow: the range of loop '", f->var->name, "' [", lo, ", ", lo, " + ",
                                      n, ") does not fit in 64 bits"));
        ScopedBinding bind(ints, f->var.get(), lo);
        int64_t &index = ints[f->var.get()]; // entries stay put while the body binds others (VarValues)
        for (int64_t i = lo; i < hi; i++) {
            index = i;
            exec(f->body);
        }
        return;
    }
    case NodeKind::Store: {
        const Store *st = s.as<Store>();
        auto it = int_buffers.find(st->buffer.get());
        if (it == int_buffers.end()) cannot_run(s, "no integer buffer bound");
        int64_t i = eval_int(st->index);
        int64_t v = eval_int(st->value);
        if (i < 0 || i >= (int64_t)it->second->size())
            throw InternalError(concat("interpreter: store to index ", i, " of '", st->buffer->name, "', a buffer of ",
                                       it->second->size(), " elements"));
        (*it->second)[(size_t)i] = v;
        return;
    }
    case NodeKind::IfThenElse: {
        const IfThenElse *c = s.as<IfThenElse>();
        exec(eval_bool(c->cond) ? c->then_case : c->else_case);
        return;
    }
    // An immutable let and a mutable local run alike here: Assign may change only the latter,
    // which the IR's construction guarantees.
    case NodeKind::LetStmt: return exec_scoped(s, s.as<LetStmt>()->var, s.as<LetStmt>()->value, s.as<LetStmt>()->body);
    case NodeKind::LocalVar:
        return exec_scoped(s, s.as<LocalVar>()->var, s.as<LocalVar>()->init, s.as<LocalVar>()->body);
    case NodeKind::Assign: {
        const Assign *a = s.as<Assign>();
        if (ints.find(a->var.get()) == ints.end()) cannot_run(s, "assignment to a variable that is not in scope");
        // Evaluated before the variable is looked up again: a reduction in the value binds its
        // variable, which may move VarValues' iterators (not its references).
        const int64_t value = eval_int(a->value);
        ints[a->var.get()] = value;
        return;
    }
    case NodeKind::Allocate: {
        const Allocate *a = s.as<Allocate>();
        if (a->buffer->type.is_float()) cannot_run(s, "floating-point buffers are not supported");
        int64_t n = eval_int(a->size);
        if (n < 0) throw RuntimeError(concat("buffer '", a->buffer->name, "' would have ", n, " elements"));
        std::vector<int64_t> memory((size_t)n);
        ScopedBinding bind(int_buffers, a->buffer.get(), &memory);
        exec(a->body);
        return;
    }
    case NodeKind::Assert: {
        const Assert *a = s.as<Assert>();
        if (eval_bool(a->cond)) return;
        std::string msg = a->text[0];
        for (size_t k = 0; k < a->values.size(); k++)
            msg += (a->values[k].type().is_float() ? concat(eval_float(a->values[k]))
                                                   : std::to_string(eval_int(a->values[k]))) +
                   a->text[k + 1];
        throw RuntimeError(msg);
    }
    default: cannot_run(s, "not an integer statement");
    }
}

} // namespace cora::ir
