/** \file Pass: build each Func's loop nest from its schedule (or the default schedule).
 *
 * Does: starting from the domain dims, applies the loop transforms in order, then reorder
 * requests, then loop annotations. Every loop extent is rewritten in terms of the final loop
 * variables; a loop whose extent uses a loop inside it is rejected, unless it is a split's
 * outer loop and the loops it uses have constant extents: it then runs to its largest value
 * over them, and the split guard (kept, or the inner loop's bound) skips the extra iterations.
 *  - split: parent = outer * f + inner, outer extent ceil(E / f); adds the guard parent < E at
 *    the innermost loop it needs.
 *  - fuse(o, i -> f): o's extent must be loop-invariant and i's may use only o. A dense inner
 *    extent E_i gives o = f / E_i, i = f % E_i; a ragged one gives o = fo(f), i = fi(f) over
 *    f < P(E_o), where P is the prefix sum of E_i and fo/fi are prelude arrays (AuxSpec).
 *  - pad_loop(d, m): d's extent E becomes ceil_mult(E, m), with the guard d < E. On a fused
 *    ragged loop the fusion maps get the pad segment (bulk padding).
 *  - remap(d -> rank): d = perm(rank) over the same (loop-invariant) extent; perm is a user
 *    length array or the prelude's longest-first order. Each is recorded in ctx.permutations
 *    and checked to be a permutation at run time (add_argument_checks).
 * Operation splitting: a Func whose op is split runs its loops over [0, point) of the split
 * dim (the point is proved to lie in [0, E]); its tail, a separate op right after it, runs
 * over [point, E) and writes the Func's storage. A padded loop covering the split dim is
 * rejected (its extra iterations would write the other part).
 * Horizontal fusion (Func::hfuse) then joins the outermost loops of independent ops into one
 * loop with an if-chain over cumulative extents, placed where the last member's nest was.
 * Guards: a split guard is dropped when the prover shows it always holds. A kept guard
 * `i + rest < e` on a serial loop i becomes its bound min(extent, e - rest). Pad guards are
 * dropped when the prover shows that every access of the op (its store and all reads,
 * reductions included) stays inside the physical storage over the padded iteration space;
 * a store that may leave its own storage is a CompileError (storage padded less than the loop).
 * With LowerOptions::remove_guards off, every guard stays; results never depend on the prover.
 * Domain dims get their value through a let around the Provide, except those given by fusion
 * maps, which are substituted so that storage lowering can cancel P(fo(f)) + fi(f) = f.
 * Default schedule (no transforms/reorders/annotations): domain order, outermost loop parallel.
 * compute_at(consumer, d) moves a producer's nest, minus the outermost loops it shares with
 * the consumer down to d, to the start of the body of the consumer's loop d (checked: shared
 * dims in order with equal extents, the consumer reads only the current indices of them, no
 * op in between reads the producer).
 * Reads of compute_inline Funcs are expanded into each op's definition (InlineFuncs.cpp).
 * Reduction loops: when a primitive names the dim of a definition that is one reduction, that
 * dim is the innermost loop before the transforms. From the inner position (the cache_write
 * loop's body, else the outermost reduction loop) the nest is: an init nest over the inner
 * loops over the Func's dims (their guards only) storing the identity, then the update nest
 * over all inner loops. cache_write(at): the element state is a stack tile indexed by the inner
 * loops over the Func's dims (constant extents), written back under their guards. With
 * reduction loops outside `at` (k-panels), storage is initialised before the outermost one
 * and each tile starts from storage instead of the identity.
 * cache_read(t, at): the box of t read inside `at` (symbolic bounds; constant size, start
 * outside `at`) is copied into a stack tile as `at`'s body starts, zeros outside t's shape.
 * Requires: a validated pipeline. Ensures: one loop nest per Func, producers first, each
 * ending in a Provide. Errors: CompileError naming the Func and loop (reorder across a
 * dependence, illegal fuse, vectorize/unroll of a non-constant extent, store outside storage).
 * Tests: tests/correctness/schedules.cpp, tests/correctness/fusion_padding.cpp,
 * tests/correctness/caching.cpp (k-panels), tests/correctness/vector_codegen.cpp (peeled guards),
 * tests/error/schedule_errors.cpp. */
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

#include "analysis/Simplify.h"
#include "analysis/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

using DimPtr = std::shared_ptr<const DimNode>;

struct Guard {
    Expr value, extent; ///< keep the body when value < extent (both in root variables)
    std::string dim;
    bool pad; ///< from pad_loop: removable when the padded iterations are safe
};

bool uses_fusion_map(const Expr &e) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) {
        if (const UFCall *u = x.as<UFCall>())
            found = found || (u->fn->aux && (u->fn->aux->kind == AuxSpec::Kind::FusedOuter ||
                                             u->fn->aux->kind == AuxSpec::Kind::FusedInner));
    });
    return found;
}

/** Proves that every access of one op stays inside its tensor's physical storage, over a scope
 * of loops (and the op's reductions); reports the first access that could not be shown. */
class StorageBoundsCheck {
public:
    StorageBoundsCheck(LoweringContext &ctx, Scope scope) : ctx_(ctx), scope_(std::move(scope)) {}

    /** Empty when in bounds, else a description of the failed obligation. */
    std::string access(const TensorNode &t, const std::vector<Expr> &logical) {
        Layout phys = physical_layout(ctx_.aux, t);
        std::vector<Expr> idx = physical_indices(ctx_.aux, t, logical);
        std::map<const VarNode *, Expr> m;
        for (size_t k = 0; k < phys.size(); k++) {
            Expr i = simplify(idx[k]);
            Expr extent = simplify(substitute(phys[k].extent, m));
            std::string where = "'" + t.name + "' at " + print(i) + " in storage dim '" + phys[k].dim->name + "'";
            if (!ctx_.prover->prove_nonneg(i, scope_)) return where + " may be negative (" + failure() + ")";
            if (!ctx_.prover->prove_nonneg(Sub::make(Sub::make(extent, i), IntImm::make(1)), scope_))
                return where + " may reach its extent " + print(extent) + " (" + failure() + ")";
            m[phys[k].dim->var.get()] = i;
        }
        return "";
    }

    /** Reads of tensors and length arrays in `e` (reduction extents included). */
    std::string reads(const Expr &e) {
        if (!e.defined()) return "";
        if (const Reduce *r = e.as<Reduce>()) {
            std::string out = reads(r->extent);
            if (!out.empty()) return out;
            scope_.push_back(ScopeEntry{r->var.get(), IntImm::make(0), r->extent});
            out = reads(r->body);
            scope_.pop_back();
            return out;
        }
        std::string out;
        if (const Access *a = e.as<Access>()) out = access(*a->tensor, a->indices);
        if (const UFCall *u = e.as<UFCall>(); u && u->fn->kind == UFKind::LengthArray) {
            Expr i = simplify(u->args[0]);
            std::string where = "length array '" + u->fn->name + "' at " + print(i);
            if (!ctx_.prover->prove_nonneg(i, scope_))
                out = where + " may be negative (" + failure() + ")";
            else if (!ctx_.prover->prove_nonneg(Sub::make(Sub::make(u->fn->count, i), IntImm::make(1)), scope_))
                out = where + " may reach its count " + print(u->fn->count) + " (" + failure() + ")";
        }
        if (out.empty())
            for_each_child(e, [&](const Expr &x) {
                if (out.empty()) out = reads(x);
            });
        return out;
    }

private:
    std::string failure() const { return ctx_.prover->last_failure(); }
    LoweringContext &ctx_;
    Scope scope_;
};

/** The loops of one Func after its transforms, before reordering. */
struct LoopPlan {
    std::vector<DimPtr> loops;
    std::map<const DimNode *, Expr> extent; ///< in terms of domain (root) variables
    /** value[d]: the value of dim d (domain or intermediate) in terms of the loop variables. */
    std::map<const VarNode *, Expr> value;
    std::vector<Guard> guards;
    std::vector<Permutation> permutations; ///< remaps, checked at run time
};

/** Applies the transforms in order. With `skip_splits`, splits are left out: the result runs
 * the same (guarded) iterations in a simpler nest, which is where padded iterations are
 * checked; nullopt when a later transform uses a loop a split made. */
std::optional<LoopPlan> plan_loops(const TensorPtr &f, bool skip_splits, LoweringContext &ctx) {
    const Schedule &sch = f->schedule;
    LoopPlan plan;
    auto &loops = plan.loops;
    auto &extent = plan.extent;
    auto &value = plan.value;
    auto &guards = plan.guards;
    for (const LayoutDim &d : loop_domain(*f)) {
        loops.push_back(d.dim);
        extent[d.dim.get()] = d.extent;
    }
    if (sch.reduction_loop) {
        const Reduce *red = f->value.as<Reduce>();
        CORA_CHECK(red && red->var == sch.reduction_loop->var, "reduction loop without its reduction");
        loops.push_back(sch.reduction_loop);
        extent[sch.reduction_loop.get()] = red->extent;
    }
    auto now = [&](const Expr &e) { return simplify(substitute(e, value)); };
    auto rebind = [&](const VarNode *v, const Expr &e) {
        for (auto &[w, x] : value)
            x = substitute(x, v, e);
        value[v] = e;
    };
    using Kind = LoopTransform::Kind;
    auto is_loop = [&](const DimPtr &d) { return std::find(loops.begin(), loops.end(), d) != loops.end(); };
    for (size_t n = 0; n < sch.transforms.size(); n++) {
        const LoopTransform &s = sch.transforms[n];
        if (skip_splits && s.kind == Kind::Split) continue;
        bool on_loops =
            s.kind == Kind::Pad || s.kind == Kind::Remap ? is_loop(s.parent) : is_loop(s.outer) && is_loop(s.inner);
        if (skip_splits && !on_loops) return std::nullopt;
        if (s.kind == Kind::Split) {
            auto it = std::find(loops.begin(), loops.end(), s.parent);
            CORA_CHECK(it != loops.end(), "split parent is not a loop");
            Expr ep = extent.at(s.parent.get());
            guards.push_back(Guard{now(var_expr(s.parent->var)), now(ep), s.parent->name, false});
            rebind(s.parent->var.get(),
                   Add::make(Mul::make(var_expr(s.outer->var), IntImm::make(s.factor)), var_expr(s.inner->var)));
            extent[s.outer.get()] =
                simplify(Div::make(Add::make(ep, IntImm::make(s.factor - 1)), IntImm::make(s.factor)));
            extent[s.inner.get()] = IntImm::make(s.factor);
            *it = s.inner;
            loops.insert(it, s.outer);
        } else if (s.kind == Kind::Remap) {
            auto it = std::find(loops.begin(), loops.end(), s.parent);
            CORA_CHECK(it != loops.end(), "remapped dim is not a loop");
            Expr e = now(extent.at(s.parent.get()));
            auto remap_error = [&](auto &&...msg) {
                throw_compile_error("remap of '", s.parent->name, "' in Func '", f->name, "': ", msg...);
            };
            for (const VarNode *v : vars_of(e, VarRole::Index))
                remap_error("its extent (", print(e), ") depends on loop '", v->name,
                            "'; only a loop with a loop-invariant extent can be remapped");
            std::shared_ptr<const UFNode> perm = s.permutation;
            for (const Guard &g : guards)
                if (g.pad && uses_var(g.value, s.parent->var.get()))
                    remap_error("'", s.parent->name, "' is padded; remap it before padding");
            if (!perm) {
                Expr cost = now(s.cost);
                for (const VarNode *v : vars_of(cost, VarRole::Index))
                    if (v != s.parent->var.get())
                        remap_error("the cost ", print(cost), " uses '", v->name, "'; it may use only '",
                                    s.parent->name, "'");
                perm = longest_first_aux(ctx.aux, s.parent, e, cost);
            }
            plan.permutations.push_back(Permutation{perm, e, s.parent->name});
            rebind(s.parent->var.get(), UFCall::make(perm, {var_expr(s.outer->var)}));
            extent[s.outer.get()] = extent.at(s.parent.get());
            *it = s.outer;
        } else if (s.kind == Kind::Pad) {
            auto it = std::find(loops.begin(), loops.end(), s.parent);
            CORA_CHECK(it != loops.end(), "padded dim is not a loop");
            Expr ep = extent.at(s.parent.get());
            for (const OpSplit &split : sch.op_splits)
                if (uses_var(now(var_expr(split.dim->var)), s.parent->var.get()))
                    throw_compile_error("pad_loop of '", s.parent->name, "' in Func '", f->name, "': the loop covers '",
                                        split.dim->name, "', where the op is split, so its padded iterations would ",
                                        "write the other part; pad a loop of the tail, or split at a multiple instead");
            guards.push_back(Guard{now(var_expr(s.parent->var)), now(ep), s.parent->name, true});
            extent[s.parent.get()] = simplify(ceil_mult_expr(ep, s.factor));
        } else {
            auto po = std::find(loops.begin(), loops.end(), s.outer);
            CORA_CHECK(po != loops.end() && po + 1 != loops.end() && po[1] == s.inner, "fused loops");
            Expr eo = now(extent.at(s.outer.get())), ei = now(extent.at(s.inner.get()));
            auto fuse_error = [&](auto &&...msg) {
                throw_compile_error("fuse of '", s.outer->name, "' and '", s.inner->name, "' in Func '", f->name,
                                    "': ", msg...);
            };
            for (const VarNode *v : vars_of(eo, VarRole::Index))
                fuse_error("the extent of '", s.outer->name, "' (", print(eo), ") depends on loop '", v->name,
                           "'; only a loop with a loop-invariant extent can be the outer one");
            for (const VarNode *v : vars_of(ei, VarRole::Index))
                if (v != s.outer->var.get())
                    fuse_error("the extent of '", s.inner->name, "' (", print(ei), ") depends on loop '", v->name,
                               "', not only on '", s.outer->name, "'");
            Expr fv = var_expr(s.fused->var);
            if (vars_of(ei, VarRole::Index).empty()) {
                rebind(s.outer->var.get(), Div::make(fv, ei));
                rebind(s.inner->var.get(), Mod::make(fv, ei));
                extent[s.fused.get()] = simplify(Mul::make(eo, ei));
            } else {
                for (const Guard &g : guards)
                    if (g.pad && g.dim == s.outer->name && uses_var(g.value, s.outer->var.get()))
                        fuse_error("'", s.outer->name, "' is padded, so the prelude would evaluate the extent of '",
                                   s.inner->name, "' past its range; pad the fused loop instead (bulk padding)");
                int64_t bulk_pad = 1; // a later pad_loop of the fused loop pads the maps themselves
                for (size_t k = n + 1; k < sch.transforms.size(); k++)
                    if (sch.transforms[k].kind == Kind::Pad && sch.transforms[k].parent == s.fused)
                        bulk_pad = sch.transforms[k].factor;
                auto prefix =
                    prefix_sum_aux(ctx.aux, {LayoutDim{s.outer, simplify(Add::make(eo, IntImm::make(1)))}}, ei);
                FusionMaps maps = fusion_maps(ctx.aux, s.fused, prefix, eo, bulk_pad);
                rebind(s.outer->var.get(), UFCall::make(maps.outer, {fv}));
                rebind(s.inner->var.get(), UFCall::make(maps.inner, {fv}));
                extent[s.fused.get()] = maps.total;
            }
            *po = s.fused;
            loops.erase(po + 1);
        }
    }
    return plan;
}

void check_split_point(const TensorNode &f, const OpSplit &split, const Layout &dom, LoweringContext &ctx) {
    Scope outside;
    for (const LayoutDim &d : dom) {
        if (d.dim == split.dim) {
            Expr point = simplify(split.point), e = simplify(d.extent);
            const char *bad = !ctx.prover->prove_nonneg(point, outside)                 ? "may be negative"
                              : !ctx.prover->prove_nonneg(Sub::make(e, point), outside) ? "may exceed the extent"
                                                                                        : nullptr;
            if (bad)
                throw_compile_error("split_op of '", d.dim->name, "' in Func '", f.name, "': the split point ",
                                    print(point), " ", bad, " ", print(e), " (", ctx.prover->last_failure(),
                                    "); it must lie in [0, ", print(e), "], e.g. clamp it with min()");
            return;
        }
        outside.push_back(ScopeEntry{d.dim->var.get(), IntImm::make(0), d.extent});
    }
}

/** Each op split's point must lie in [0, E] for every index of the dims outside it, where E is
 * the extent the earlier splits left. */
void check_split_points(const TensorNode &f, LoweringContext &ctx) {
    Layout dom = f.domain;
    for (const OpSplit &split : f.schedule.op_splits) {
        check_split_point(f, split, dom, ctx);
        for (LayoutDim &d : dom)
            if (d.dim == split.dim) d.extent = split.point;
    }
}

std::string print_list(const std::vector<Expr> &v) {
    std::string out;
    for (size_t i = 0; i < v.size(); i++)
        out += (i ? ", " : "") + print(v[i]);
    return out;
}
bool equal_all(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (!equal(a[i], b[i])) return false;
    return true;
}

/** Whether e is a multiple of c (c > 0) for every value of its variables, shown syntactically. */
bool multiple_of(const Expr &e, int64_t c) {
    if (const int64_t *k = as_const_int(e)) return *k % c == 0;
    if (const Add *a = e.as<Add>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Sub *a = e.as<Sub>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Min *a = e.as<Min>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Max *a = e.as<Max>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Mul *a = e.as<Mul>()) return multiple_of(a->a, c) || multiple_of(a->b, c);
    return false;
}

/** The terms of a sum (nested Adds). */
std::vector<Expr> additive_terms(const Expr &e) {
    std::vector<Expr> terms, todo{e};
    while (!todo.empty()) {
        Expr t = todo.back();
        todo.pop_back();
        if (const Add *a = t.as<Add>()) {
            todo.push_back(a->a);
            todo.push_back(a->b);
        } else {
            terms.push_back(t);
        }
    }
    return terms;
}

/** A guard `i + rest < e` on the loop over i, with rest and e free of i, holds exactly for
 * i < e - rest: that bound (undefined when the guard has another form). */
Expr loop_bound_from_guard(const Expr &guard, const VarNode *i) {
    const LT *lt = guard.as<LT>();
    if (!lt || uses_var(lt->b, i)) return Expr();
    Expr rest = IntImm::make(0);
    int uses = 0;
    for (const Expr &t : additive_terms(lt->a)) {
        if (t.as<VarNode>() == i)
            uses++;
        else if (uses_var(t, i))
            return Expr();
        else
            rest = Add::make(rest, t);
    }
    return uses == 1 ? simplify(Sub::make(lt->b, rest)) : Expr();
}

/** The value of a guard `value < extent` without the innermost loops it does not need:
 * a + i * s < e, with i a loop over [0, c) that a and e do not use and a, e multiples of c * s,
 * holds exactly when a < e (a < e means a <= e - c * s). E.g. the split guard
 * nb * 1024 + no * 32 + ni < floor_mult(N, 32) moves out of the vectorized ni loop. */
Expr peel_aligned_loops(Expr value, const Expr &extent, const std::vector<DimPtr> &loops,
                        const std::vector<Expr> &extents) {
    for (size_t k = loops.size(); k-- > 0;) {
        const VarNode *i = loops[k]->var.get();
        if (!uses_var(value, i)) continue;
        const int64_t *c = as_const_int(extents[k]);
        if (!c || *c <= 0 || uses_var(extent, i)) break;
        // The additive terms of value: exactly one uses i, as i or i * s.
        std::vector<Expr> terms = additive_terms(value);
        Expr rest;
        int64_t step = 0;
        for (const Expr &t : terms) {
            if (!uses_var(t, i)) {
                rest = rest.defined() ? Add::make(rest, t) : t;
                continue;
            }
            const VarNode *v = t.as<VarNode>();
            const Mul *m = t.as<Mul>();
            if (step == 0 && v == i) {
                step = 1;
            } else if (step == 0 && m && (m->a.as<VarNode>() == i || m->b.as<VarNode>() == i)) {
                const int64_t *s = as_const_int(m->a.as<VarNode>() == i ? m->b : m->a);
                if (!s || *s <= 0) return value;
                step = *s;
            } else {
                return value;
            }
        }
        if (step == 0 || !rest.defined() || !multiple_of(rest, *c * step) || !multiple_of(extent, *c * step))
            return value;
        value = simplify(rest);
    }
    return value;
}

/** The largest per-tile cache (elements); it lives on the stack of a loop body. */
constexpr int64_t kMaxTileElements = 16384;

/** A cache_read tile: filled by `copy` at the start of its loop's body. */
struct CacheTile {
    VarPtr buffer;
    int64_t size;
    Stmt copy;
};

/** cache_read of `t` in loop `pos`: the box of `t` that `element` reads over the loops inside
 * `pos` (and the reductions in `element`), the tile and its copy, and `element` reading the
 * tile. The box comes from symbolic bounds of the read's indices over those loops; its start
 * may use only the loops outside, its size must be a constant. */
std::pair<CacheTile, Expr> cache_read_region(const TensorNode &f, const TensorPtr &t, const std::string &at_name,
                                             const Expr &element, const LoopPlan &plan,
                                             const std::vector<DimPtr> &loops, const std::vector<Expr> &extents,
                                             size_t pos, LoweringContext &ctx) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_read of '", t->name, "' at '", at_name, "' in Func '", f.name, "': ", msg...);
    };
    const Access *read = nullptr;
    Scope inner;
    for (size_t k = pos + 1; k < loops.size(); k++)
        inner.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), extents[k]});
    visit_exprs(element, [&](const Expr &e) {
        if (const Reduce *r = e.as<Reduce>())
            inner.push_back(ScopeEntry{r->var.get(), IntImm::make(0), simplify(substitute(r->extent, plan.value))});
        const Access *a = e.as<Access>();
        if (!a || a->tensor != t) return;
        if (read && !equal_all(read->indices, a->indices))
            fail("it is read at (", print_list(read->indices), ") and at (", print_list(a->indices),
                 "); a cached tensor must be read at one index tuple");
        read = a;
    });
    if (!read) fail("no read of it is left (an inlined Func is not stored)");
    std::vector<Expr> lo;
    std::vector<int64_t> size;
    int64_t total = 1;
    for (size_t j = 0; j < read->indices.size(); j++) {
        const std::string &dim = t->domain[j].dim->name;
        Expr e = simplify(substitute(read->indices[j], plan.value));
        Expr l = symbolic_bound(e, inner, false), h = symbolic_bound(e, inner, true);
        if (!l.defined() || !h.defined()) fail("the index ", print(e), " in dim '", dim, "' has no bound");
        l = simplify(l);
        for (const ScopeEntry &s : inner)
            if (uses_var(l, s.var))
                fail("the region in dim '", dim, "' starts at ", print(l), ", which depends on '", s.var->name,
                     "', a loop inside '", at_name, "'");
        Expr sz = simplify(Add::make(Sub::make(h, l), IntImm::make(1)));
        const int64_t *c = as_const_int(sz);
        if (!c)
            fail("the region in dim '", dim, "' has size ", print(sz), ", not a constant; split the loops inside '",
                 at_name, "' so that they have constant extents");
        lo.push_back(l);
        size.push_back(std::max<int64_t>(*c, 1));
        total *= size.back();
    }
    if (total > kMaxTileElements)
        fail("the region has ", total, " elements, more than ", kMaxTileElements, "; cache at an inner loop");
    // The copy: every element of the box inside t's shape; the others are zero (never read by
    // an iteration that runs unguarded, since those read inside the shape).
    CacheTile tile{make_var(t->name + "_cache", VarRole::Buffer, t->type), total, Stmt()};
    Scope copy_scope;
    for (size_t k = 0; k <= pos; k++)
        copy_scope.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), extents[k]});
    std::vector<VarPtr> copy_vars; // null for a dim of size 1
    std::vector<Expr> idx;
    std::map<const VarNode *, Expr> shape_at;
    Expr flat = IntImm::make(0), cond;
    for (size_t j = 0; j < lo.size(); j++) {
        Expr c = IntImm::make(0);
        copy_vars.push_back(nullptr);
        if (size[j] > 1) {
            copy_vars[j] = make_var(t->name + "_" + t->domain[j].dim->name + "_c", VarRole::Index);
            copy_scope.push_back(ScopeEntry{copy_vars[j].get(), IntImm::make(0), IntImm::make(size[j])});
            c = var_expr(copy_vars[j]);
        }
        idx.push_back(simplify(Add::make(lo[j], c)));
        flat = simplify(Add::make(Mul::make(flat, IntImm::make(size[j])), c));
        Expr extent = simplify(substitute(t->domain[j].extent, shape_at));
        shape_at[t->domain[j].dim->var.get()] = idx[j];
        // Keep only the bound conditions the prover cannot show.
        auto require = [&](const Expr &holds, const Expr &nonneg) {
            if (!ctx.prover->prove_nonneg(nonneg, copy_scope)) cond = cond.defined() ? And::make(cond, holds) : holds;
        };
        require(GE::make(idx[j], IntImm::make(0)), idx[j]);
        require(LT::make(idx[j], extent), Sub::make(Sub::make(extent, idx[j]), IntImm::make(1)));
    }
    Stmt leaf = Store::make(tile.buffer, flat, Access::make(t, idx));
    if (cond.defined()) leaf = IfThenElse::make(cond, leaf, Store::make(tile.buffer, flat, make_zero(t->type)));
    for (size_t j = lo.size(); j-- > 0;)
        if (copy_vars[j]) leaf = For::make(copy_vars[j], IntImm::make(0), IntImm::make(size[j]), ForKind::Serial, leaf);
    tile.copy = leaf;
    // The reads: the tile at the index's offset from the box's start.
    Expr offset = IntImm::make(0);
    for (size_t j = 0; j < lo.size(); j++) // in loop variables, so that the tile's base cancels
        offset = Add::make(Mul::make(offset, IntImm::make(size[j])),
                           Sub::make(substitute(read->indices[j], plan.value), lo[j]));
    struct UseTile : IRMutator {
        const TensorNode *t;
        Expr load;
        Expr mutate_node(const Access *op, const Expr &self) override {
            return op->tensor.get() == t ? load : IRMutator::mutate_node(op, self);
        }
        using IRMutator::mutate_node;
    } use;
    use.t = t.get();
    use.load = Load::make(tile.buffer, simplify(offset));
    return {tile, use.mutate(element)};
}

Stmt schedule_func(const TensorPtr &f, LoweringContext &ctx) {
    const Schedule &sch = f->schedule;
    check_split_points(*f, ctx);
    Expr value = inline_reads(f->value, ctx);
    // A scheduled reduction: its body is computed per iteration of the reduction loops.
    const Reduce *red = nullptr;
    Expr red_body;
    if (sch.reduction_loop) {
        red = value.as<Reduce>();
        CORA_CHECK(red != nullptr, "scheduled reduction vanished");
        red_body = substitute(red->body, red->var.get(), var_expr(sch.reduction_loop->var)); // inlining renames
    }
    LoopPlan plan = *plan_loops(f, false, ctx);
    auto &loops = plan.loops;
    auto &extent = plan.extent;
    auto &guards = plan.guards;
    auto now = [&](const Expr &e) { return simplify(substitute(e, plan.value)); };
    for (const Permutation &p : plan.permutations) {
        if (p.fn->kind == UFKind::LengthArray && !ctx.prover->prove_nonneg(Sub::make(p.fn->count, p.extent), {}))
            throw_compile_error("remap of '", p.loop, "' in Func '", f->name, "': length array '", p.fn->name, "' has ",
                                print(p.fn->count), " elements, fewer than the loop's ", print(p.extent));
        ctx.permutations.push_back(p);
    }
    // Reorder: the named loops take the positions they occupy, in the order given.
    if (!sch.order.empty()) {
        std::vector<size_t> positions;
        for (const DimPtr &d : sch.order) {
            auto it = std::find(loops.begin(), loops.end(), d);
            if (it == loops.end())
                throw_compile_error("reorder in Func '", f->name, "': '", d->name,
                                    "' is no longer a loop (it was split)");
            positions.push_back((size_t)(it - loops.begin()));
        }
        std::sort(positions.begin(), positions.end());
        for (size_t i = 0; i < positions.size(); i++)
            loops[positions[i]] = sch.order[i];
    }
    // Everything in terms of the final loop variables. A split's inner loop often leaves
    // (o * f + i) / f = o + i / f in an extent (e.g. floor_mult(m, 4) with m = mo * 4 + mi):
    // with the constant ranges of the loops, i / f folds to 0, so the extent uses only mo.
    Scope constant_loops;
    for (const DimPtr &d : loops)
        if (as_const_int(now(extent.at(d.get()))))
            constant_loops.push_back(ScopeEntry{d->var.get(), IntImm::make(0), now(extent.at(d.get()))});
    std::vector<Expr> extents;
    Scope scope;
    auto is_split_outer = [&](const DimPtr &d) {
        return std::any_of(sch.transforms.begin(), sch.transforms.end(), [&](const LoopTransform &t) {
            return t.kind == LoopTransform::Kind::Split && t.outer == d;
        });
    };
    for (size_t k = 0; k < loops.size(); k++) {
        Expr e = fold_small_div_mod(now(extent.at(loops[k].get())), constant_loops, *ctx.prover);
        // A split's outer loop whose extent uses loops inside it (k-panels of a reduction whose
        // length varies by tile: trmm with the triangle cut at each tile's last row) runs to its
        // largest value over those loops' constant ranges. The split's guard, parent < E, skips
        // the extra iterations (it stays: with the wider range it no longer always holds).
        Scope inside;
        for (size_t j = k; j < loops.size(); j++)
            if (uses_var(e, loops[j]->var.get())) {
                const int64_t *c = as_const_int(now(extent.at(loops[j].get())));
                if (c) inside.push_back(ScopeEntry{loops[j]->var.get(), IntImm::make(0), IntImm::make(*c)});
            }
        if (!inside.empty() && is_split_outer(loops[k]))
            if (Expr widest = symbolic_bound(e, inside, true); widest.defined()) e = simplify(widest);
        for (const VarNode *v : vars_of(e, VarRole::Index)) {
            bool outside = false;
            for (size_t j = 0; j < k; j++)
                outside = outside || loops[j]->var.get() == v;
            if (!outside)
                throw_compile_error("schedule of Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                    print(e), ", which depends on loop '", v->name,
                                    "'; that loop must stay outside it");
        }
        extents.push_back(e);
        scope.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), e});
    }
    // Pad guards go when the padded iterations are safe: every access inside storage.
    std::vector<Expr> idx = store_indices(*f);
    TensorPtr target = f->is_split_tail ? split_head(*f) : f;
    bool padded = std::any_of(guards.begin(), guards.end(), [](const Guard &g) { return g.pad; });
    std::string pad_unsafe;
    if (padded) {
        // Check in the split-free nest when there is one: split guards are then implicit.
        std::optional<LoopPlan> simple = plan_loops(f, true, ctx);
        const LoopPlan &p = simple ? *simple : plan;
        auto in_p = [&](const Expr &e) { return simplify(substitute(e, p.value)); };
        Scope pad_scope;
        std::vector<Expr> pad_extents;
        for (const DimPtr &d : p.loops) {
            pad_extents.push_back(in_p(p.extent.at(d.get())));
            pad_scope.push_back(ScopeEntry{d->var.get(), IntImm::make(0), pad_extents.back()});
        }
        std::vector<Expr> at;
        for (const Expr &i : idx)
            at.push_back(in_p(i));
        StorageBoundsCheck check(ctx, pad_scope);
        std::string store = check.access(*target, at);
        if (!store.empty())
            throw_compile_error("Func '", f->name, "': the padded loop writes outside its storage: ", store,
                                "; pad its storage at least as much as the loop (pad_storage / fuse_storage)");
        pad_unsafe = check.reads(in_p(red ? red_body : value));
        // Inner loop extents are evaluated in padded iterations too (e.g. len(b) for b >= B).
        for (size_t k = 0; k < p.loops.size() && pad_unsafe.empty(); k++)
            pad_unsafe =
                StorageBoundsCheck(ctx, Scope(pad_scope.begin(), pad_scope.begin() + (long)k)).reads(pad_extents[k]);
        // (The split nest's extents derive from these at the same, guarded, root values.)
    }
    // Guards: attach each to the innermost loop it uses, unless proved redundant.
    std::vector<std::vector<Expr>> guards_at(loops.size() + 1);
    for (const Guard &g : guards) {
        // (As for extents: a guard min(floor_mult(m, 128) + 128, M) with m = mb * 128 + mo * 8 + mi
        // then uses mb only, and sits outside the tile's loops.)
        Expr v = fold_small_div_mod(now(g.value), constant_loops, *ctx.prover);
        Expr e = fold_small_div_mod(now(g.extent), constant_loops, *ctx.prover);
        v = peel_aligned_loops(v, e, loops, extents);
        size_t depth = 0;
        for (size_t k = 0; k < loops.size(); k++) {
            if (uses_var(v, loops[k]->var.get()) || uses_var(e, loops[k]->var.get())) depth = k + 1;
        }
        Scope visible(scope.begin(), scope.begin() + (long)depth);
        std::string reason;
        if (!ctx.remove_guards)
            reason = "guard removal is off";
        else if (g.pad)
            reason = pad_unsafe.empty() ? "" : "a padded iteration may read outside storage: " + pad_unsafe;
        else if (!ctx.prover->prove_nonneg(Sub::make(Sub::make(e, v), IntImm::make(1)), visible))
            reason = ctx.prover->last_failure();
        if (reason.empty()) {
            ctx.guards_removed++;
            continue;
        }
        ctx.guards_kept++;
        if (ctx.debug >= 1)
            std::cerr << "-- cora: guard kept in '" << f->name << "': " << print(v) << " < " << print(e) << " ("
                      << reason << ")\n";
        guards_at[depth].push_back(LT::make(v, e));
    }

    // The loop kinds: default parallel outermost loop, then the annotations.
    const size_t n = loops.size();
    std::vector<bool> is_reduction(n, false);
    if (red) {
        Expr r = now(var_expr(sch.reduction_loop->var)); // in terms of the loops made from it
        for (size_t k = 0; k < n; k++)
            is_reduction[k] = uses_var(r, loops[k]->var.get());
    }
    std::vector<ForKind> kinds(n, ForKind::Serial);
    bool user_parallel = false;
    for (auto &[d, a] : sch.annotations)
        user_parallel = user_parallel || a == LoopAnnotation::Parallel;
    if (!user_parallel && n > 0 && !is_reduction[0]) kinds[0] = ForKind::Parallel;
    for (size_t k = 0; k < n; k++)
        for (auto &[d, a] : sch.annotations) {
            if (d != loops[k]) continue;
            if (a == LoopAnnotation::Parallel) kinds[k] = ForKind::Parallel;
            if (a == LoopAnnotation::Vectorize || a == LoopAnnotation::Unroll) {
                const char *what = a == LoopAnnotation::Vectorize ? "vectorize" : "unroll";
                if (!as_const_int(extents[k]))
                    throw_compile_error(what, " in Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                        print(extents[k]), ", not a constant; split it first");
                kinds[k] = a == LoopAnnotation::Vectorize ? ForKind::Vectorized : ForKind::Unrolled;
            }
        }
    // Annotations on dims that are no longer loops (split after being marked).
    for (auto &[d, a] : sch.annotations)
        if (std::find(loops.begin(), loops.end(), d) == loops.end())
            throw_compile_error("schedule of Func '", f->name, "': '", d->name,
                                "' is marked but is not a loop any more (it was split)");
    // A kept guard `i + rest < e` on the serial loop over i it is attached to becomes that
    // loop's bound, min(extent, e - rest): the same iterations run and the body has no branch
    // (a partial last k-panel keeps its register tile; a guarded body did not, at half speed).
    // (Not when a loop over the Func's dims would get a bound that uses a reduction loop: the
    // nests over the Func's dims alone, e.g. a tile's write-back, have no such loop.)
    std::vector<Expr> loop_extents = extents;
    auto uses_reduction_loop = [&](const Expr &c) {
        for (size_t j = 0; j < n; j++)
            if (is_reduction[j] && uses_var(c, loops[j]->var.get())) return true;
        return false;
    };
    for (size_t k = 0; k < n; k++) {
        if (kinds[k] != ForKind::Serial) continue;
        std::vector<Expr> &kept = guards_at[k + 1];
        for (size_t g = 0; g < kept.size();) {
            Expr bound = loop_bound_from_guard(kept[g], loops[k]->var.get());
            if (!bound.defined() || (!is_reduction[k] && uses_reduction_loop(bound))) {
                g++;
                continue;
            }
            loop_extents[k] = simplify(Max::make(Min::make(loop_extents[k], bound), IntImm::make(0)));
            kept.erase(kept.begin() + (long)g);
        }
    }
    auto position_of = [&](const DimPtr &d, const char *what) {
        auto it = std::find(loops.begin(), loops.end(), d);
        if (it == loops.end())
            throw_compile_error(what, " at '", d->name, "' in Func '", f->name, "': '", d->name,
                                "' is not a loop of the final nest (it was split or fused)");
        return (size_t)(it - loops.begin());
    };

    // Domain dims (and the reduction dim) get their values: fusion-map values are substituted
    // (storage lowering cancels them), the others are lets around each leaf statement.
    std::map<const VarNode *, Expr> direct;
    std::vector<std::pair<VarPtr, Expr>> lets;
    std::vector<VarPtr> bound;
    for (const LayoutDim &d : f->domain)
        bound.push_back(d.dim->var);
    if (red) bound.push_back(sch.reduction_loop->var);
    for (const VarPtr &v : bound) {
        auto it = plan.value.find(v.get());
        if (it == plan.value.end()) continue;
        if (uses_fusion_map(it->second))
            direct[v.get()] = simplify(it->second);
        else
            lets.emplace_back(v, simplify(it->second));
    }
    auto with_lets = [&](Stmt s, bool elements_only) {
        for (auto &[v, e] : lets)
            if (!(elements_only && red && v == sch.reduction_loop->var)) s = LetStmt::make(v, e, s);
        return s;
    };
    std::vector<Expr> at;
    for (const Expr &i : idx)
        at.push_back(substitute(i, direct));

    // cache_read: the region each cached tensor's reads cover inside its loop, copied first.
    Expr element = red ? red_body : value;
    std::map<size_t, std::vector<CacheTile>> prologue; // loop position -> tiles filled as its body starts
    for (const Schedule::CacheRead &c : sch.cache_reads) {
        size_t pos = position_of(c.at, "cache_read");
        // A producer computed inside this Func's loop `d` (directly or with its consumer) is
        // complete for the iteration only once `d`'s body starts: the copy must be inside `d`.
        for (TensorPtr p = c.tensor; p && p->schedule.has_compute_at(); p = p->schedule.at_consumer.lock())
            if (p->schedule.at_consumer.lock() == f) {
                auto it = std::find(loops.begin(), loops.end(), p->schedule.at_loop);
                if (it != loops.end() && (size_t)(it - loops.begin()) > pos)
                    throw_compile_error("cache_read of '", c.tensor->name, "' at '", c.at->name, "' in Func '", f->name,
                                        "': it is computed inside loop '", p->schedule.at_loop->name,
                                        "' (compute_at), after the copy would be made; cache it at '",
                                        p->schedule.at_loop->name, "' or inside");
                break;
            }
        auto [tile, cached] = cache_read_region(*f, c.tensor, c.at->name, element, plan, loops, extents, pos, ctx);
        prologue[pos].push_back(tile);
        element = cached;
    }
    element = substitute(element, direct);

    // Where the per-element state starts: the cache_write loop's body, else the outermost
    // reduction loop; the loops from there on form the inner part.
    size_t first_reduction = n;
    for (size_t k = n; k-- > 0;)
        if (is_reduction[k]) first_reduction = k;
    std::optional<size_t> cache_pos;
    if (sch.cache_write_at) cache_pos = position_of(sch.cache_write_at, "cache_write");
    size_t inner = cache_pos ? *cache_pos + 1 : first_reduction;
    // Reduction loops outside the tile (k-panels): storage holds the partial result between
    // the tile's visits; it is initialised before the outermost reduction loop and each visit
    // loads it into the tile.
    const bool tile_accumulates = cache_pos && red && first_reduction < inner;
    /** The loops at `positions` around `leaf`, each with its guards (only those over the
     * Func's dims when `elements_only`) and, for full nests, its prologue. */
    auto nest = [&](const std::vector<size_t> &positions, Stmt s, bool elements_only) {
        for (size_t j = positions.size(); j-- > 0;) {
            size_t k = positions[j];
            if (!elements_only && prologue.count(k))
                for (const CacheTile &c : prologue[k])
                    s = Allocate::make(c.buffer, IntImm::make(c.size), Block::make({c.copy, s}), MemoryType::Stack);
            for (const Expr &c : guards_at[k + 1])
                if (!(elements_only && uses_reduction_loop(c))) s = IfThenElse::make(c, s);
            s = For::make(loops[k]->var, IntImm::make(0), loop_extents[k], kinds[k], s);
        }
        return s;
    };
    std::vector<size_t> inner_all, inner_elements;
    for (size_t k = inner; k < n; k++) {
        inner_all.push_back(k);
        if (!is_reduction[k]) inner_elements.push_back(k);
    }
    auto combine = [&](const Expr &old) {
        return red->op == ReduceOp::Sum   ? Add::make(old, element)
               : red->op == ReduceOp::Max ? Max::make(old, element)
                                          : Min::make(old, element);
    };
    Stmt inner_part;
    if (cache_pos) {
        // The tile: one element per iteration of the loops over the Func's dims inside `at`.
        VarPtr tile = make_var(f->name + "_tile", VarRole::Buffer, f->type);
        Expr tile_index = IntImm::make(0);
        int64_t tile_size = 1;
        for (size_t k : inner_elements) {
            const int64_t *e = as_const_int(extents[k]);
            if (!e)
                throw_compile_error("cache_write at '", sch.cache_write_at->name, "' in Func '", f->name, "': loop '",
                                    loops[k]->name, "' has extent ", print(extents[k]),
                                    ", not a constant; the tile needs constant extents (split it first)");
            tile_size *= std::max<int64_t>(*e, 1);
            tile_index = simplify(Add::make(Mul::make(tile_index, IntImm::make(*e)), var_expr(loops[k]->var)));
        }
        if (tile_size > kMaxTileElements)
            throw_compile_error("cache_write at '", sch.cache_write_at->name, "' in Func '", f->name,
                                "': the tile has ", tile_size, " elements, more than ", kMaxTileElements,
                                "; cache at an inner loop");
        std::vector<Stmt> parts;
        if (tile_accumulates)
            parts.push_back(
                nest(inner_elements, with_lets(Store::make(tile, tile_index, Access::make(target, at)), true), true));
        else if (red)
            parts.push_back(
                nest(inner_elements, Store::make(tile, tile_index, reduce_identity(red->op, f->type)), true));
        Expr updated = red ? combine(Load::make(tile, tile_index)) : element;
        parts.push_back(nest(inner_all, with_lets(Store::make(tile, tile_index, updated), false), false));
        parts.push_back(
            nest(inner_elements, with_lets(Provide::make(target, at, Load::make(tile, tile_index)), true), true));
        inner_part = Allocate::make(tile, IntImm::make(tile_size), Block::make(parts), MemoryType::Stack);
    } else if (red) {
        Stmt init =
            nest(inner_elements, with_lets(Provide::make(target, at, reduce_identity(red->op, f->type)), true), true);
        Stmt update =
            nest(inner_all, with_lets(Provide::make(target, at, combine(Access::make(target, at))), false), false);
        inner_part = Block::make({init, update});
    } else {
        inner_part = with_lets(Provide::make(target, at, element), false);
    }
    std::vector<size_t> outer_positions, panel_positions, panel_elements;
    for (size_t k = 0; k < inner; k++)
        (tile_accumulates && k >= first_reduction ? panel_positions : outer_positions).push_back(k);
    if (tile_accumulates) {
        // The loops from the outermost reduction loop to the tile, after an init of storage
        // over all the element loops from there on.
        for (size_t k = first_reduction; k < n; k++)
            if (!is_reduction[k]) panel_elements.push_back(k);
        Stmt init =
            nest(panel_elements, with_lets(Provide::make(target, at, reduce_identity(red->op, f->type)), true), true);
        inner_part = Block::make({init, nest(panel_positions, inner_part, false)});
    }
    Stmt body = nest(outer_positions, inner_part, false);
    for (const Expr &c : guards_at[0])
        body = IfThenElse::make(c, body);
    return body;
}

/** Whether op `consumer` reads what op `producer` writes. */
bool reads(const TensorPtr &consumer, const TensorPtr &producer, const LoweringContext &ctx) {
    bool found = false;
    visit_exprs(inline_reads(consumer->value, ctx), [&](const Expr &e) {
        if (const Access *a = e.as<Access>()) found = found || a->tensor.get() == &store_target(*producer);
    });
    return found;
}

/** compute_at bookkeeping: producers' loop bodies waiting to be placed at the start of a
 * consumer's loop body (per op, per loop variable), in producer order. */
using PendingInserts = std::vector<std::map<const VarNode *, std::vector<Stmt>>>;

/** Places the pending producer bodies of op `k` into its nest. */
void place_pending(size_t k, std::vector<Stmt> &nests, PendingInserts &pending) {
    for (auto &entry : pending[k]) {
        const VarNode *var = entry.first; // (clang 14 cannot capture structured bindings)
        const std::vector<Stmt> &bodies = entry.second;
        std::function<Stmt(const Stmt &)> insert = [&](const Stmt &s) {
            const For *loop = s.as<For>();
            CORA_CHECK(loop != nullptr, "compute_at loop vanished");
            Stmt body;
            if (loop->var.get() == var) {
                std::vector<Stmt> all = bodies;
                all.push_back(loop->body);
                body = Block::make(all);
            } else {
                body = insert(loop->body);
            }
            return For::make(loop->var, loop->min, loop->extent, loop->for_kind, body);
        };
        nests[k] = insert(nests[k]);
    }
    pending[k].clear();
}

/** compute_at: takes the nest of `f` (with its own producers placed), strips the outermost
 * loops it shares with the consumer down to `at_loop`, and queues the rest for the start of
 * the body of the consumer's loop `at_loop`. */
void compute_at_nest(const TensorPtr &f, const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                     PendingInserts &pending, const LoweringContext &ctx) {
    const TensorPtr g = f->schedule.at_consumer.lock();
    const DimPtr &d = f->schedule.at_loop;
    if (!g)
        throw_compile_error("compute_at of Func '", f->name, "' at '", d->name,
                            "': its consumer no longer exists, so this pipeline cannot compute it");
    auto fail = [&](auto &&...msg) {
        throw_compile_error("compute_at of Func '", f->name, "' in '", g->name, "' at '", d->name, "': ", msg...);
    };
    if (!f->schedule.op_splits.empty()) fail("its op is split");
    if (!f->schedule.hfuse.empty() || f->schedule.hfuse_member) fail("it is horizontally fused");
    size_t fp = (size_t)(std::find(ops.begin(), ops.end(), f) - ops.begin());
    size_t gp = (size_t)(std::find(ops.begin(), ops.end(), g) - ops.begin());
    if (gp == ops.size() || gp < fp) fail("'", g->name, "' is not computed after it by this pipeline");
    // The consumer's outermost loops down to d: directly nested, over f's outermost dims.
    std::vector<const For *> outer;
    for (const For *loop = nests[gp].as<For>(); loop; loop = loop->body.as<For>()) {
        outer.push_back(loop);
        if (loop->var == d->var) break;
    }
    if (outer.empty() || outer.back()->var != d->var)
        fail("'", d->name,
             "' is not one of the consumer's outermost loops (split, fused, reordered, or under a guard)");
    size_t depth = outer.size();
    for (size_t j = 0; j < depth; j++) {
        if (j == f->domain.size()) fail("it has fewer dims than the consumer's loops down to '", d->name, "'");
        const LayoutDim &fd = f->domain[j];
        if (outer[j]->var != fd.dim->var)
            fail("the consumer's loop ", j, " is '", outer[j]->var->name, "' but its dim ", j, " is '", fd.dim->name,
                 "'; the loops down to '", d->name, "' must be its outermost dims, in order");
        if (!equal(simplify(outer[j]->extent), simplify(fd.extent)))
            fail("the consumer's loop '", fd.dim->name, "' runs to ", print(outer[j]->extent), ", not over its extent ",
                 print(fd.extent));
    }
    // An op between f and g that reads f must run after f: computed at g at least as deep.
    auto depth_at = [&](const TensorNode &r) {
        for (size_t j = 0; j < g->domain.size(); j++)
            if (g->domain[j].dim == r.schedule.at_loop) return j + 1;
        return (size_t)0;
    };
    for (size_t k = fp + 1; k < gp; k++)
        if (reads(ops[k], f, ctx) && !(ops[k]->schedule.at_consumer.lock() == g && depth_at(*ops[k]) >= depth))
            fail("'", ops[k]->name, "', computed before '", g->name, "', reads it");
    // Ops horizontally fused with the consumer run concurrently with its iterations, so none
    // of them may read f (it is computed inside those iterations).
    std::vector<TensorPtr> group;
    for (const TensorPtr &op : ops) {
        std::vector<TensorPtr> members = hfuse_members(*op);
        if (op == g || std::find(members.begin(), members.end(), g) != members.end()) {
            group.push_back(op);
            group.insert(group.end(), members.begin(), members.end());
        }
    }
    for (const TensorPtr &m : group)
        if (m != g && reads(m, f, ctx))
            fail("'", m->name, "' runs in one loop with '", g->name, "' (hfuse) and reads it, but it is computed ",
                 "inside the iterations of '", g->name, "'");
    // The consumer reads f only at its current indices of those dims.
    visit_exprs(inline_reads(g->value, ctx), [&](const Expr &e) {
        const Access *a = e.as<Access>();
        if (!a || a->tensor != f) return;
        for (size_t j = 0; j < depth; j++)
            if (!equal(a->indices[j], var_expr(f->domain[j].dim->var)))
                fail("'", g->name, "' reads it at ", print(a->indices[j]), " in dim '", f->domain[j].dim->name,
                     "', but only the elements at its current '", f->domain[j].dim->name, "' are computed there");
    });
    // f's own outermost loops must be the same, unguarded.
    place_pending(fp, nests, pending);
    Stmt inner = nests[fp];
    for (size_t j = 0; j < depth; j++) {
        const For *loop = inner.as<For>();
        if (!loop || loop->var != f->domain[j].dim->var)
            fail("its own loop nest must start with its dims down to '", d->name,
                 "', unsplit and unguarded (schedule only the loops inside them)");
        inner = loop->body;
    }
    pending[gp][d->var.get()].push_back(inner);
    nests[fp] = Block::make({});
}

/** Horizontal fusion of the nests of `group` (leader first) into one loop, placed where the
 * last member's nest was; the others' places become empty. `ops` lists the ops in order. */
void hfuse_group(const std::vector<TensorPtr> &group, const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                 const LoweringContext &ctx) {
    const std::string &leader = group[0]->name;
    auto fail = [&](auto &&...msg) { throw_compile_error("hfuse of Func '", leader, "': ", msg...); };
    std::vector<size_t> pos;
    for (const TensorPtr &m : group) {
        auto it = std::find(ops.begin(), ops.end(), m);
        if (it == ops.end()) fail("'", m->name, "' is not computed by this pipeline");
        pos.push_back((size_t)(it - ops.begin()));
    }
    size_t first = *std::min_element(pos.begin(), pos.end()), last = *std::max_element(pos.begin(), pos.end());
    for (const TensorPtr &a : group)
        for (const TensorPtr &b : group)
            if (a != b && reads(a, b, ctx))
                fail("'", a->name, "' reads '", b->name, "'; fused ops must be independent");
    for (size_t k = first + 1; k < last; k++) {
        bool member = std::find(pos.begin(), pos.end(), k) != pos.end();
        for (const TensorPtr &m : group)
            if (!member && reads(ops[k], m, ctx))
                fail("'", ops[k]->name, "', computed between the fused ops, reads '", m->name, "'");
    }
    VarPtr x = make_var("hfused_" + leader, VarRole::Index);
    Expr offset = IntImm::make(0);
    std::vector<std::pair<Expr, Stmt>> cases; // (end of range, body)
    std::optional<ForKind> kind;
    for (size_t i = 0; i < group.size(); i++) {
        const For *loop = nests[pos[i]].as<For>();
        if (!loop) fail("the outermost statement of '", group[i]->name, "' is not a loop (a guard sits outside it)");
        if (kind && *kind != loop->for_kind)
            fail("the outermost loops differ in kind (parallel, serial, vectorized, unrolled)");
        kind = loop->for_kind;
        Expr end = simplify(Add::make(offset, loop->extent));
        cases.emplace_back(end, LetStmt::make(loop->var, simplify(Sub::make(var_expr(x), offset)), loop->body));
        offset = end;
    }
    Stmt body = cases.back().second;
    for (int i = (int)cases.size() - 2; i >= 0; i--)
        body = IfThenElse::make(LT::make(var_expr(x), cases[(size_t)i].first), cases[(size_t)i].second, body);
    for (size_t p : pos)
        nests[p] = Block::make({});
    nests[last] = For::make(x, IntImm::make(0), offset, *kind, body);
}

} // namespace

Stmt schedule_loops(LoweringContext &ctx) {
    // The ops: each Func, followed by the tails of its op splits.
    std::vector<TensorPtr> ops;
    std::function<void(const TensorPtr &)> add = [&](const TensorPtr &op) {
        ops.push_back(op);
        for (const OpSplit &s : op->schedule.op_splits)
            add(s.tail);
    };
    for (const TensorPtr &f : ctx.funcs)
        add(f);
    std::vector<Stmt> nests;
    for (const TensorPtr &op : ops)
        nests.push_back(schedule_func(op, ctx));
    // compute_at, producers first: a Func computed at a consumer that is itself computed at
    // another moves along with it (when it sits inside the loops the consumer keeps).
    PendingInserts pending(ops.size());
    for (const TensorPtr &op : ops)
        if (op->schedule.has_compute_at()) compute_at_nest(op, ops, nests, pending, ctx);
    for (size_t k = 0; k < ops.size(); k++)
        place_pending(k, nests, pending);
    for (const TensorPtr &op : ops) {
        if (op->schedule.hfuse.empty()) continue;
        std::vector<TensorPtr> group{op};
        std::vector<TensorPtr> members = hfuse_members(*op);
        group.insert(group.end(), members.begin(), members.end());
        hfuse_group(group, ops, nests, ctx);
    }
    return Block::make(nests);
}

} // namespace cora::ir
