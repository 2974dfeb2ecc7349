#include "formats/ragged/StorageLayout.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "analysis/AuxKind.h"
#include "analysis/Simplify.h"
#include "formats/ragged/RaggedKinds.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

bool depends_on(const Expr &e, const DimNode *d) { return uses_var(e, d->var.get()); }

/** The canonical index variable of aux-layout position k: keys name positions, not dims, so
 * equal raggedness over different Dim objects is one array (and the fusion inverse law, which
 * matches prefix arrays by identity, applies across tensors). Its id is fixed (the top of the id
 * range), so keys print the same in every table and every process. */
Expr canonical_var(size_t k) {
    std::string name(1, '_'); // (appended, not "_" + ...: GCC 12 warns falsely on the latter)
    name.append(std::to_string(k));
    return var_expr(std::make_shared<VarNode>(name, UINT64_MAX - k, VarRole::Index, Int64));
}

std::string canonical_key(const Layout &layout, const std::vector<Expr> &exprs) {
    std::map<const VarNode *, Expr> m;
    for (size_t k = 0; k < layout.size(); k++)
        m[layout[k].dim->var.get()] = canonical_var(k);
    std::string key = "[";
    for (auto &ld : layout)
        key += structural_key(substitute(ld.extent, m)) + ",";
    key += "]";
    for (const Expr &e : exprs)
        key += " ; " + (e.defined() ? structural_key(substitute(e, m)) : std::string("-"));
    return key;
}

} // namespace

std::shared_ptr<const UFNode> prefix_sum_aux(AuxTable &table, Layout layout, Expr summand) {
    std::string key = "prefix" + canonical_key(layout, {summand});
    return table.intern(key, [&] {
        auto spec = std::make_shared<AuxSpec>();
        spec->kind = prefix_sum_kind(summand);
        spec->layout = layout;
        spec->key = key;
        auto u = std::make_shared<UFNode>();
        u->name = "prefix_" + spec->layout.back().dim->name;
        u->arity = (int)spec->layout.size();
        u->min_value = 0;
        u->max_value = INT64_MAX;
        u->aux = spec;
        return u;
    });
}

FusionMaps fusion_maps(AuxTable &table, const std::shared_ptr<const DimNode> &fused,
                       const std::shared_ptr<const UFNode> &prefix, const Expr &outer_extent, int64_t pad) {
    CORA_CHECK(prefix->aux && prefix->aux->kind->is_prefix_sum() && prefix->arity == 1,
               "fusion maps need a 1-D prefix sum");
    CORA_CHECK(pad >= 1, "fusion pad must be positive");
    Expr total = UFCall::make(prefix, {outer_extent});
    Expr padded = pad == 1 ? total : simplify(ceil_mult_expr(total, pad));
    Layout layout{LayoutDim{fused, padded}};
    std::string base = prefix->aux->key + " / " + structural_key(outer_extent) + " pad " + std::to_string(pad);
    auto map = [&](bool outer, const char *prefix_name, std::shared_ptr<const UFNode> partner) {
        std::string key = std::string(outer ? "fo of " : "fi of ") + base;
        return table.intern(key, [&] {
            auto spec = std::make_shared<AuxSpec>();
            spec->kind = fusion_map_kind(outer, prefix, partner, outer_extent);
            spec->layout = layout;
            spec->key = key;
            auto u = std::make_shared<UFNode>();
            u->name = prefix_name + fused->name;
            u->arity = 1;
            u->min_value = 0;
            u->max_value = INT64_MAX;
            u->aux = spec;
            return u;
        });
    };
    FusionMaps maps;
    maps.outer = map(true, "fo_", nullptr);
    maps.inner = map(false, "fi_", maps.outer);
    maps.total = total;
    maps.padded_total = padded;
    return maps;
}

std::shared_ptr<const UFNode> longest_first_aux(AuxTable &table, const std::shared_ptr<const DimNode> &d,
                                                const Expr &extent, const Expr &cost) {
    Layout layout{LayoutDim{d, extent}};
    std::string key = "longest-first" + canonical_key(layout, {cost});
    return table.intern(key, [&] {
        auto spec = std::make_shared<AuxSpec>();
        spec->kind = longest_first_kind(extent, cost);
        spec->layout = layout;
        spec->key = key;
        auto u = std::make_shared<UFNode>();
        u->name = "order_" + d->name;
        u->arity = 1;
        u->min_value = 0;
        u->max_value = INT64_MAX;
        u->aux = spec;
        return u;
    });
}

Expr ceil_mult_expr(const Expr &e, int64_t m) {
    if (m == 1) return e;
    return Mul::make(Div::make(Add::make(e, IntImm::make(m - 1)), IntImm::make(m)), IntImm::make(m));
}

void validate_layout(const Layout &layout, const std::string &what) {
    std::set<const DimNode *> outer;
    for (size_t k = 0; k < layout.size(); k++) {
        const LayoutDim &ld = layout[k];
        if (!ld.extent.defined() || !ld.extent.type().is_int())
            throw_compile_error(what, ": extent of dim '", ld.dim->name, "' must be an integer expression");
        for (size_t j = 0; j < k; j++) {
            if (layout[j].dim == ld.dim) throw_compile_error(what, ": dim '", ld.dim->name, "' appears twice");
        }
        for (const VarNode *v : vars_of(ld.extent, VarRole::Index)) {
            if (!v->dim)
                throw_compile_error(what, ": extent of dim '", ld.dim->name, "' uses variable '", v->name, "'");
            if (outer.count(v->dim)) continue;
            bool inner = false;
            for (size_t j = k; j < layout.size(); j++)
                inner = inner || layout[j].dim.get() == v->dim;
            if (inner)
                throw_compile_error(what, ": extent of dim '", ld.dim->name, "' (", print(ld.extent),
                                    ") depends on dim '", v->name,
                                    "', which is not outside it; an extent may only use outer dims");
            throw_compile_error(what, ": extent of dim '", ld.dim->name, "' (", print(ld.extent),
                                ") uses unknown dim '", v->name, "', which is not a dim of ", what);
        }
        outer.insert(ld.dim.get());
    }
}

std::vector<std::pair<int, int>> dim_graph(const Layout &layout) {
    std::vector<std::pair<int, int>> edges;
    for (size_t k = 0; k < layout.size(); k++)
        for (size_t j = 0; j < k; j++)
            if (depends_on(layout[k].extent, layout[j].dim.get())) edges.emplace_back((int)j, (int)k);
    return edges;
}

namespace {

/** slice = factor * ragged, where factor uses no index variable. */
std::pair<Expr, Expr> split_invariant_factor(const Expr &slice) {
    std::vector<Expr> factors;
    std::function<void(const Expr &)> collect = [&](const Expr &e) {
        if (const Mul *m = e.as<Mul>()) {
            collect(m->a);
            collect(m->b);
        } else {
            factors.push_back(e);
        }
    };
    collect(slice);
    Expr inv = IntImm::make(1), var = IntImm::make(1);
    for (const Expr &f : factors) {
        if (vars_of(f, VarRole::Index).empty())
            inv = Mul::make(inv, f);
        else
            var = Mul::make(var, f);
    }
    return {simplify(inv), simplify(var)};
}

} // namespace

FlatLayout flatten_layout(AuxTable &table, const Layout &layout) {
    const int n = (int)layout.size();
    Expr slice = IntImm::make(1);
    Expr offset = IntImm::make(0);
    for (int k = n - 1; k >= 0; k--) {
        const DimNode *dk = layout[k].dim.get();
        Expr vk = var_expr(dk->var);
        if (!depends_on(slice, dk)) {
            offset = Add::make(Mul::make(vk, slice), offset);
            slice = simplify(Mul::make(layout[k].extent, slice));
            continue;
        }
        // The aux array's own layout: the outer dims the slice size depends on, closed under
        // the dependencies of their extents, then d_k with one extra entry for the total.
        std::set<int> keep;
        for (int j = 0; j < k; j++)
            if (depends_on(slice, layout[j].dim.get())) keep.insert(j);
        for (int j = k - 1; j >= 0; j--) {
            bool needed = depends_on(layout[k].extent, layout[j].dim.get());
            for (int m : keep)
                needed = needed || (m > j && depends_on(layout[m].extent, layout[j].dim.get()));
            if (needed) keep.insert(j);
        }
        Layout aux_layout;
        std::vector<Expr> args;
        for (int j : keep) {
            aux_layout.push_back(layout[j]);
            args.push_back(var_expr(layout[j].dim->var));
        }
        aux_layout.push_back(LayoutDim{layout[k].dim, simplify(Add::make(layout[k].extent, IntImm::make(1)))});
        args.push_back(vk);
        // Loop-invariant factors of the slice size (inner dense extents, params) stay outside
        // the prefix sum: P(c * f) = c * P(f). Arrays are then shared between tensors that
        // differ only in their dense inner dims, and fused-loop offsets simplify by the
        // inverse law P(fo(t)) + fi(t) = t.
        auto [factor, ragged] = split_invariant_factor(slice);
        auto aux = prefix_sum_aux(table, aux_layout, ragged);
        offset = Add::make(Mul::make(UFCall::make(aux, args), factor), offset);
        args.back() = layout[k].extent;
        slice = simplify(Mul::make(UFCall::make(aux, args), factor));
    }
    FlatLayout flat;
    flat.offset = simplify(offset);
    flat.size = simplify(slice);
    flat.aux = aux_closure(table, {flat.offset, flat.size});
    return flat;
}

Expr flat_offset(const FlatLayout &flat, const Layout &layout, const std::vector<Expr> &indices) {
    CORA_CHECK(indices.size() == layout.size(), "flat_offset: index count");
    std::map<const VarNode *, Expr> m;
    for (size_t i = 0; i < layout.size(); i++)
        m[layout[i].dim->var.get()] = indices[i];
    return substitute(flat.offset, m);
}

namespace {

/** The tensor's storage transforms applied, in order, to its layout and (if given) indices. */
Layout apply_storage_transforms(AuxTable &table, const TensorNode &t, std::vector<Expr> *idx) {
    Layout l = t.storage;
    using Kind = StorageTransform::Kind;
    for (const StorageTransform &st : t.storage_transforms) {
        size_t p = st.position;
        CORA_CHECK(p < l.size() && (st.kind != Kind::Fuse || p + 1 < l.size()), "storage transform position");
        Layout out(l.begin(), l.begin() + (long)(st.kind == Kind::Reorder ? 0 : p));
        std::vector<Expr> at;
        if (idx) at.assign(idx->begin(), idx->begin() + (long)(st.kind == Kind::Reorder ? 0 : p));
        if (st.kind == Kind::Fuse) {
            const LayoutDim &outer = l[p], &inner = l[p + 1];
            auto prefix = prefix_sum_aux(
                table, {LayoutDim{outer.dim, simplify(Add::make(outer.extent, IntImm::make(1)))}}, inner.extent);
            out.push_back(LayoutDim{st.a, simplify(ceil_mult_expr(UFCall::make(prefix, {outer.extent}), st.factor))});
            out.insert(out.end(), l.begin() + (long)p + 2, l.end());
            if (idx) {
                at.push_back(Add::make(UFCall::make(prefix, {(*idx)[p]}), (*idx)[p + 1]));
                at.insert(at.end(), idx->begin() + (long)p + 2, idx->end());
            }
        } else if (st.kind == Kind::Split) {
            Expr f = IntImm::make(st.factor);
            out.push_back(LayoutDim{st.a, simplify(Div::make(Add::make(l[p].extent, IntImm::make(st.factor - 1)), f))});
            out.push_back(LayoutDim{st.b, f});
            Expr whole = Add::make(Mul::make(var_expr(st.a->var), f), var_expr(st.b->var));
            for (size_t k = p + 1; k < l.size(); k++)
                out.push_back(LayoutDim{l[k].dim, substitute(l[k].extent, l[p].dim->var.get(), whole)});
            if (idx) {
                at.push_back(Div::make((*idx)[p], f));
                at.push_back(Mod::make((*idx)[p], f));
                at.insert(at.end(), idx->begin() + (long)p + 1, idx->end());
            }
        } else {
            for (size_t k : st.order) {
                out.push_back(l[k]);
                if (idx) at.push_back((*idx)[k]);
            }
        }
        l = out;
        if (idx) *idx = at;
    }
    return l;
}

} // namespace

Layout physical_layout(AuxTable &table, const TensorNode &t) { return apply_storage_transforms(table, t, nullptr); }

std::vector<Expr> physical_indices(AuxTable &table, const TensorNode &t, const std::vector<Expr> &logical) {
    std::vector<Expr> idx = logical;
    apply_storage_transforms(table, t, &idx);
    return idx;
}

std::vector<std::shared_ptr<const UFNode>> aux_closure(AuxTable &table, const std::vector<Expr> &exprs) {
    std::vector<std::shared_ptr<const UFNode>> order;
    std::set<const UFNode *> seen;
    std::function<void(const Expr &)> visit_expr;
    std::function<void(const std::shared_ptr<const UFNode> &)> add = [&](const std::shared_ptr<const UFNode> &u) {
        if (seen.count(u.get())) return;
        seen.insert(u.get());
        // Dependencies first: the arrays its kind reads or is checked against (a fusion map's),
        // the aux layout's own flattening and the expressions it is built from.
        const AuxInputs inputs = u->aux->kind->inputs();
        for (const auto &a : inputs.arrays)
            add(a);
        for (auto &ld : u->aux->layout)
            visit_expr(ld.extent);
        for (const Expr &e : inputs.exprs)
            visit_expr(e);
        FlatLayout inner = flatten_layout(table, u->aux->layout);
        for (auto &d : inner.aux)
            add(d);
        order.push_back(u);
    };
    visit_expr = [&](const Expr &e) {
        visit_exprs(e, [&](const Expr &x) {
            if (const UFCall *c = x.as<UFCall>()) {
                if (c->fn->kind == UFKind::Aux) add(c->fn);
            }
        });
    };
    for (const Expr &e : exprs)
        visit_expr(e);
    return order;
}

} // namespace cora::ir
