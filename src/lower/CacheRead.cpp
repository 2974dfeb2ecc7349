/** \file Step: cache_read tiles, and the element and indices of an op's leaf statements.
 *
 * cache_read(t, at): the box of t read inside `at` (symbolic bounds of the read's indices over
 * the loops inside `at` and the element's reductions; its start may use only the loops outside,
 * its size must be a constant of at most kMaxTileElements) is copied into a stack tile as `at`'s
 * body starts, zeros outside t's shape, and the element reads the tile. The tile holds t's dims
 * in the schedule's tile order (t's domain order unless cache_read named another: a transposed
 * tile); the copy's loops run in that order, so that its innermost loop writes contiguously (a
 * transposed tile of 16-multiples in 16 x 16 blocks; a tile dim that t's storage splits, in
 * chunks of the split: storage_split_factor). Before bounding, division and modulo by
 * constants are folded over the loops' ranges. A producer computed inside this Func's loop `d`
 * (compute_at) is complete only once `d`'s body starts: the copy must be inside `d`.
 * Domain dims (and the reduction dim) get their values: those given by fusion maps are
 * substituted, so that storage lowering can cancel P(fo(f)) + fi(f) = f; the others are lets
 * around each leaf statement.
 * Tests: tests/correctness/caching.cpp (transposed tiles too), tests/error/schedule_errors.cpp,
 * tests/correctness/block_sparse.cpp and default_schedule.cpp (the defaults' transposed panels). */
#include <map>

#include "analysis/AuxKind.h"
#include "analysis/Bounds.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The side of the square blocks a transposed tile is copied in (see cache_read_region). */
constexpr int64_t kTransposeBlock = 16;

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

bool uses_fusion_map(const Expr &e) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) {
        if (const UFCall *u = x.as<UFCall>()) found = found || (u->fn->aux && aux_kind(*u->fn->aux).maps_fused_loop());
    });
    return found;
}

/** The factor by which t's storage splits its dim `j` (split_storage), or 1. A copy loop over
 * that dim runs in chunks of the factor: each chunk reads consecutive elements (the split's
 * inner dim), so the C compiler copies whole vectors. One loop over a 64-column panel of a weight
 * stored in 16-column panels divided and reduced its index per element, and became 8 gathers per
 * row: 12% of the encoder's FF1 kernel (perf, AVX-512 Zen 5). */
int64_t storage_split_factor(const TensorNode &t, size_t j) {
    std::vector<const DimNode *> dims; // the layout as the transforms reshape it
    for (const LayoutDim &d : t.storage)
        dims.push_back(d.dim.get());
    if (j >= dims.size()) return 1;
    const DimNode *dim = dims[j];
    for (const StorageTransform &st : t.storage_transforms) {
        if (st.kind == StorageTransform::Kind::Reorder) {
            std::vector<const DimNode *> reordered;
            for (size_t o : st.order)
                if (o < dims.size()) reordered.push_back(dims[o]);
            if (reordered.size() != dims.size()) return 1;
            dims = reordered;
            continue;
        }
        if (st.position >= dims.size()) return 1;
        if (st.kind == StorageTransform::Kind::Split) {
            if (dims[st.position] == dim) return st.factor;
            dims[st.position] = st.a.get();
            dims.insert(dims.begin() + (std::ptrdiff_t)st.position + 1, st.b.get());
        } else { // Fuse: the two dims become one
            if (st.position + 1 >= dims.size()) return 1;
            dims[st.position] = st.a.get();
            dims.erase(dims.begin() + (std::ptrdiff_t)st.position + 1);
        }
    }
    return 1;
}

/** cache_read of `t` in loop `pos`: the box of `t` that `element` reads over the loops inside
 * `pos` (and the reductions in `element`), the tile and its copy, and `element` reading the
 * tile. The box comes from symbolic bounds of the read's indices over those loops; its start
 * may use only the loops outside, its size must be a constant. */
std::pair<CacheTile, Expr> cache_read_region(const LoopPlan &plan, const TensorPtr &t, const std::string &at_name,
                                             const std::vector<size_t> &tile_order, const Expr &element, size_t pos,
                                             const LoweringContext &ctx) {
    const TensorNode &f = *plan.op;
    const std::vector<DimPtr> &loops = plan.loops;
    const std::vector<Expr> &extents = plan.extents;
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_read of '", t->name, "' at '", at_name, "' in Func '", f.name, "': ", msg...);
    };
    // Division and modulo by a constant folded over the loops' ranges, twice ((o * 32 + i) / 32
    // leaves o + i / 32 once simplified): a block index n / 32 of a tile of 16 of n's values
    // inside a block is then the block loop, and its region one block.
    auto fold = [&](const Expr &e) {
        Expr once = fold_small_div_mod(e, plan.constant_loops, *ctx.prover);
        return fold_small_div_mod(once, plan.constant_loops, *ctx.prover);
    };
    const Access *read = nullptr;
    Scope inner;
    for (size_t k = pos + 1; k < loops.size(); k++)
        inner.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), extents[k]});
    visit_exprs(element, [&](const Expr &e) {
        if (const Reduce *r = e.as<Reduce>())
            inner.push_back(ScopeEntry{r->var.get(), IntImm::make(0), plan.now(r->extent)});
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
        Expr e = fold(plan.now(read->indices[j]));
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
    // The tile's dims, outermost first (t's domain order unless transposed), and their strides.
    std::vector<size_t> order = tile_order;
    if (order.empty())
        for (size_t j = 0; j < lo.size(); j++)
            order.push_back(j);
    CORA_CHECK(order.size() == lo.size(), "cache_read: a tile order of ", order.size(), " dims for ", lo.size());
    std::vector<int64_t> stride(lo.size(), 1);
    for (size_t k = order.size() - 1; k-- > 0;)
        stride[order[k]] = stride[order[k + 1]] * size[order[k + 1]];
    // A transposed tile is copied in blocks of kTransposeBlock x kTransposeBlock when both its
    // innermost dim and t's innermost dim are multiples of that: the loads of one block's column
    // touch kTransposeBlock lines, reused by the next columns, where a whole column of a panel
    // whose rows are 2 KB apart maps its lines onto two L1 sets and misses on every load (a
    // 64 x 256 panel of nn.Linear's weight: the copy cost more than the GEMM's multiply-adds).
    const size_t tile_inner = order.back(), source_inner = lo.size() - 1;
    const bool blocked = tile_inner != source_inner && size[tile_inner] % kTransposeBlock == 0 &&
                         size[source_inner] % kTransposeBlock == 0;
    struct CopyLoop {
        VarPtr var;
        int64_t extent;
    };
    std::vector<std::vector<CopyLoop>> loops_of(lo.size()); // per dim: [outer, inner] when blocked
    std::vector<Expr> idx;
    std::map<const VarNode *, Expr> shape_at;
    Expr flat = IntImm::make(0), cond;
    for (size_t j = 0; j < lo.size(); j++) {
        Expr c = IntImm::make(0);
        const std::string name = t->name + "_" + t->domain[j].dim->name + "_c";
        if (blocked && (j == tile_inner || j == source_inner)) {
            VarPtr outer = make_var(name + "o", VarRole::Index), inner = make_var(name + "i", VarRole::Index);
            loops_of[j] = {{outer, size[j] / kTransposeBlock}, {inner, kTransposeBlock}};
            c = Add::make(Mul::make(var_expr(outer), IntImm::make(kTransposeBlock)), var_expr(inner));
        } else if (const int64_t f = j == tile_inner ? storage_split_factor(*t, j) : 1;
                   f > 1 && f < size[j] && size[j] % f == 0) {
            // In chunks of the storage's split (storage_split_factor).
            VarPtr outer = make_var(name + "o", VarRole::Index), inner = make_var(name + "i", VarRole::Index);
            loops_of[j] = {{outer, size[j] / f}, {inner, f}};
            c = Add::make(Mul::make(var_expr(outer), IntImm::make(f)), var_expr(inner));
        } else if (size[j] > 1) {
            VarPtr v = make_var(name, VarRole::Index);
            loops_of[j] = {{v, size[j]}};
            c = var_expr(v);
        }
        for (const CopyLoop &l : loops_of[j])
            copy_scope.push_back(ScopeEntry{l.var.get(), IntImm::make(0), IntImm::make(l.extent)});
        idx.push_back(simplify(Add::make(lo[j], c)));
        flat = simplify(Add::make(flat, Mul::make(c, IntImm::make(stride[j]))));
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
    if (cond.defined())
        leaf = IfThenElse::make(cond, leaf, Store::make(tile.buffer, flat, make_zero(t->type.value_type())));
    // The copy's loops, outermost first: in the tile's order, so that its innermost loop writes the
    // tile contiguously; blocked: the other dims, then the blocks, then one block's t-innermost
    // loop outside its tile-innermost loop.
    std::vector<CopyLoop> nest;
    for (size_t j : order)
        if (!blocked || (j != tile_inner && j != source_inner))
            for (const CopyLoop &l : loops_of[j])
                nest.push_back(l);
    if (blocked)
        nest.insert(nest.end(), {loops_of[tile_inner][0], loops_of[source_inner][0], loops_of[source_inner][1],
                                 loops_of[tile_inner][1]});
    for (size_t k = nest.size(); k-- > 0;)
        leaf = For::make(nest[k].var, IntImm::make(0), IntImm::make(nest[k].extent), ForKind::Serial, leaf);
    tile.copy = leaf;
    // The reads: the tile at the index's offset from the box's start.
    Expr offset = IntImm::make(0);
    for (size_t j = 0; j < lo.size(); j++) // in loop variables, so that the tile's base cancels
        offset = Add::make(offset, Mul::make(Sub::make(substitute(read->indices[j], plan.transformed.value), lo[j]),
                                             IntImm::make(stride[j])));
    struct UseTile : IRMutator {
        const TensorNode *t;
        Expr load;
        Expr mutate_node(const Access *op, const Expr &self) override {
            return op->tensor.get() == t ? load : IRMutator::mutate_node(op, self);
        }
        using IRMutator::mutate_node;
    } use;
    use.t = t.get();
    use.load = Load::make(tile.buffer, fold(simplify(offset)));
    return {tile, use.mutate(element)};
}

} // namespace

CacheReads apply_cache_reads(const LoopPlan &plan, const LoweringContext &ctx) {
    const TensorPtr &f = plan.op;
    const front::Schedule &sch = *plan.schedule;
    CacheReads out;
    // Domain dims (and the reduction dim) get their values: fusion-map values are substituted
    // (storage lowering cancels them), the others are lets around each leaf statement.
    std::map<const VarNode *, Expr> direct;
    std::vector<VarPtr> bound;
    for (const LayoutDim &d : f->domain)
        bound.push_back(d.dim->var);
    if (plan.red) bound.push_back(sch.reduction_loop->var);
    for (const VarPtr &v : bound) {
        auto it = plan.transformed.value.find(v.get());
        if (it == plan.transformed.value.end()) continue;
        if (uses_fusion_map(it->second))
            direct[v.get()] = simplify(it->second);
        else
            out.lets.emplace_back(v, simplify(it->second));
    }
    for (const Expr &i : plan.store_at)
        out.store_at.push_back(substitute(i, direct));

    // cache_read: the region each cached tensor's reads cover inside its loop, copied first.
    Expr element = plan.element();
    for (const front::Schedule::CacheRead &c : sch.cache_reads) {
        size_t pos = plan.position_of(c.at, "cache_read");
        // A producer computed inside this Func's loop `d` (directly or with its consumer) is
        // complete for the iteration only once `d`'s body starts: the copy must be inside `d`.
        for (TensorPtr p = c.tensor; p && front::schedule_of(*p).has_compute_at();
             p = front::schedule_of(*p).at_consumer.lock()) {
            const front::Schedule &ps = front::schedule_of(*p);
            if (ps.at_consumer.lock() == f) {
                auto it = std::find(plan.loops.begin(), plan.loops.end(), ps.at_loop);
                if (it != plan.loops.end() && (size_t)(it - plan.loops.begin()) > pos)
                    throw_compile_error("cache_read of '", c.tensor->name, "' at '", c.at->name, "' in Func '", f->name,
                                        "': it is computed inside loop '", ps.at_loop->name,
                                        "' (compute_at), after the copy would be made; cache it at '", ps.at_loop->name,
                                        "' or inside");
                break;
            }
        }
        auto [tile, cached] = cache_read_region(plan, c.tensor, c.at->name, c.order, element, pos, ctx);
        out.prologue[pos].push_back(tile);
        element = cached;
    }
    // Lets of plain loop arithmetic (a split reduction's r = tap * 128 + ci) are substituted into
    // the element where a division or modulo by a constant reads them, so that it folds with the
    // loops' ranges: a convolution's kernel row (r / 128) / 3 became tap / 3, a constant once the
    // tap loop is unrolled, where it had cost two divisions per multiply-add.
    std::map<const VarNode *, Expr> affine = direct;
    for (const auto &[v, e] : out.lets) {
        bool plain = true;
        visit_exprs(e, [&](const Expr &x) { plain = plain && !x.as<UFCall>() && !x.as<Load>() && !x.as<Access>(); });
        if (plain) affine[v.get()] = e;
    }
    struct FoldDivisions : IRMutator {
        const std::map<const VarNode *, Expr> *affine;
        const LoopPlan *plan;
        const LoweringContext *ctx;
        Expr fold(const Expr &self, const Expr &a) {
            bool reads_let = false;
            visit_exprs(a, [&](const Expr &x) {
                if (const VarNode *v = x.as<VarNode>()) reads_let = reads_let || affine->count(v);
            });
            if (!reads_let) return self;
            // Twice: simplifying (o * 128 + i) / 128 leaves o + i / 128, which folds the second time.
            Expr once = fold_small_div_mod(substitute(self, *affine), plan->constant_loops, *ctx->prover);
            return fold_small_div_mod(once, plan->constant_loops, *ctx->prover);
        }
        Expr mutate_node(const Div *op, const Expr &self) override {
            return as_const_int(op->b) && op->type.is_int() ? fold(self, op->a) : IRMutator::mutate_node(op, self);
        }
        Expr mutate_node(const Mod *op, const Expr &self) override {
            return as_const_int(op->b) && op->type.is_int() ? fold(self, op->a) : IRMutator::mutate_node(op, self);
        }
        using IRMutator::mutate_node;
    } folder;
    folder.affine = &affine;
    folder.plan = &plan;
    folder.ctx = &ctx;
    out.element = folder.mutate(substitute(element, direct));
    if (plan.epilogue.defined()) out.epilogue = substitute(plan.epilogue, direct);
    return out;
}

} // namespace cora::ir
