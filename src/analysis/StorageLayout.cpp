#include "analysis/StorageLayout.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

std::atomic<uint64_t> next_aux_id{1u << 30};

bool depends_on(const Expr &e, const DimNode *d) { return uses_var(e, d->var.get()); }

/** One UFNode per structural key, so that equal aux arrays are one symbol process-wide. */
std::shared_ptr<const UFNode> intern_aux(Layout layout, Expr summand) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<const UFNode>> table;
    std::string key = "prefix[";
    for (auto &ld : layout)
        key += ld.dim->name + "#" + std::to_string(ld.dim->id) + "<" + structural_key(ld.extent) + ">,";
    key += "] of " + structural_key(summand);
    std::lock_guard<std::mutex> lock(mu);
    auto it = table.find(key);
    if (it != table.end()) return it->second;
    auto spec = std::make_shared<AuxSpec>();
    spec->layout = std::move(layout);
    spec->summand = std::move(summand);
    spec->key = key;
    auto u = std::make_shared<UFNode>();
    u->id = next_aux_id++;
    u->name = "prefix_" + spec->layout.back().dim->name;
    u->kind = UFKind::Aux;
    u->arity = (int)spec->layout.size();
    u->min_value = 0;
    u->max_value = INT64_MAX;
    u->aux = spec;
    table[key] = u;
    return u;
}

} // namespace

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

FlatLayout flatten_layout(const Layout &layout) {
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
        auto aux = intern_aux(aux_layout, slice);
        offset = Add::make(UFCall::make(aux, args), offset);
        args.back() = layout[k].extent;
        slice = UFCall::make(aux, args);
    }
    FlatLayout flat;
    flat.offset = simplify(offset);
    flat.size = simplify(slice);
    flat.aux = aux_closure({flat.offset, flat.size});
    return flat;
}

Expr flat_offset(const FlatLayout &flat, const Layout &layout, const std::vector<Expr> &indices) {
    internal_check(indices.size() == layout.size(), "flat_offset: index count");
    std::map<const VarNode *, Expr> m;
    for (size_t i = 0; i < layout.size(); i++)
        m[layout[i].dim->var.get()] = indices[i];
    return substitute(flat.offset, m);
}

std::vector<std::shared_ptr<const UFNode>> aux_closure(const std::vector<Expr> &exprs) {
    std::vector<std::shared_ptr<const UFNode>> order;
    std::set<const UFNode *> seen;
    std::function<void(const Expr &)> visit_expr;
    std::function<void(const std::shared_ptr<const UFNode> &)> add = [&](const std::shared_ptr<const UFNode> &u) {
        if (seen.count(u.get())) return;
        seen.insert(u.get());
        // Dependencies first: the aux layout's own flattening and the summand.
        for (auto &ld : u->aux->layout)
            visit_expr(ld.extent);
        visit_expr(u->aux->summand);
        FlatLayout inner = flatten_layout(u->aux->layout);
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
