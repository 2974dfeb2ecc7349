/** \file Pass: derive the kernel's argument list in ABI order: params, length arrays (and shape
 * tensors, among them by name: the aux arrays' kinds name those they read), aux
 * arrays (dependencies first), input tensors, output tensors. Every symbol the body, the sizes,
 * the length counts and the aux specs mention is included. Names are deterministic.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/unit/lowering.cpp (argument order). */
#include <algorithm>
#include <map>
#include <set>

#include "analysis/AuxKind.h"
#include "formats/ragged/LayoutDescription.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

std::vector<ModuleArg> infer_arguments(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage) {
    std::vector<ModuleArg> args;
    std::vector<VarPtr> params;
    std::vector<std::shared_ptr<const UFNode>> lengths;
    std::set<const void *> seen;
    std::vector<Expr> pending;

    auto add_input_array = [&](const std::shared_ptr<const UFNode> &fn) {
        if (!seen.insert(fn.get()).second) return;
        lengths.push_back(fn);
        pending.push_back(fn->count); // a shape tensor's count is the product of its dims
    };
    auto scan = [&](const Expr &e) {
        visit_exprs(e, [&](const Expr &x) {
            if (const VarNode *v = x.as<VarNode>()) {
                if (v->role == VarRole::Param && seen.insert(v).second)
                    params.push_back(std::static_pointer_cast<const VarNode>(x.ptr()));
            } else if (const UFCall *u = x.as<UFCall>()) {
                if (u->fn->kind == UFKind::LengthArray) add_input_array(u->fn);
            }
        });
    };
    std::vector<Expr> roots;
    visit_exprs(s, [&](const Expr &e) { roots.push_back(e); });
    // The sizes in a fixed order: the map is keyed by address, and the order the aux closure meets
    // arrays in decides their numbers (prefix_b2, prefix_b3) and their argument order, so iterating
    // the map made a kernel's source depend on where the heap put its tensors (a kernel-cache miss
    // in any process whose allocations differed). Inputs, then computed tensors producers first,
    // then the rest (copies of cache_read and the like) by name and size.
    for (const TensorPtr &t : ctx.inputs)
        if (auto it = storage.find(t.get()); it != storage.end()) roots.push_back(it->second.flat.size);
    for (const TensorPtr &t : ctx.funcs)
        if (auto it = storage.find(t.get()); it != storage.end()) roots.push_back(it->second.flat.size);
    std::vector<std::pair<std::string, Expr>> others;
    for (const auto &entry : storage) { // (not a structured binding: clang 14 cannot capture one)
        const TensorNode *t = entry.first;
        auto listed = [t](const std::vector<TensorPtr> &v) {
            return std::any_of(v.begin(), v.end(), [t](const TensorPtr &x) { return x.get() == t; });
        };
        if (!listed(ctx.inputs) && !listed(ctx.funcs))
            others.emplace_back(t->name + " " + structural_key(entry.second.flat.size), entry.second.flat.size);
    }
    std::stable_sort(others.begin(), others.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &[key, size] : others)
        roots.push_back(size);
    std::vector<std::shared_ptr<const UFNode>> aux = aux_closure(ctx.aux, roots);
    for (auto &a : aux) {
        for (auto &ld : a->aux->layout)
            roots.push_back(ld.extent);
        AuxInputs in = a->aux->kind->inputs();
        for (const Expr &e : in.exprs)
            roots.push_back(e);
        for (const std::shared_ptr<const UFNode> &t : in.tensors)
            add_input_array(t);
    }
    for (auto &t : ctx.inputs)
        for (auto &ld : t->storage)
            roots.push_back(ld.extent);
    for (const Expr &e : roots)
        scan(e);
    while (!pending.empty()) {
        Expr e = pending.back();
        pending.pop_back();
        scan(e);
    }

    auto by_name = [](auto &v, auto name_of) {
        std::stable_sort(v.begin(), v.end(), [&](const auto &a, const auto &b) { return name_of(a) < name_of(b); });
    };
    by_name(params, [](const VarPtr &v) { return v->name; });
    by_name(lengths, [](const std::shared_ptr<const UFNode> &u) { return u->name; });

    for (const VarPtr &p : params) {
        ModuleArg a;
        a.kind = ModuleArg::Kind::Param;
        a.name = p->name;
        a.var = p;
        args.push_back(a);
    }
    for (auto &u : lengths) {
        ModuleArg a;
        a.kind = ModuleArg::Kind::LengthArray;
        a.name = u->name;
        a.uf = u;
        a.var = make_var(u->name, VarRole::Buffer, Int32);
        a.count_var = make_var(u->name + "_count", VarRole::Local, Int64);
        a.expected_count = u->count;
        if (u->dims.empty()) {
            a.layout = "int32 " + u->name + "[" + print(u->count) + "]\n";
        } else {
            std::string dims;
            for (const Expr &d : u->dims)
                dims += concat("[", print(d), "]");
            a.layout =
                concat("int32 ", u->name, dims, ", row-major (a shape tensor: ", print(u->count), " elements)\n");
        }
        if (u->static_values)
            a.layout += "values fixed when compiling: the kernel was specialised to them and checks every element "
                        "on every call\n";
        args.push_back(a);
    }
    std::map<std::string, int> aux_names;
    for (auto &u : aux) {
        ModuleArg a;
        a.kind = ModuleArg::Kind::AuxArray;
        int n = ++aux_names[u->name]; // several prefix arrays over one dim: number them
        a.name = n == 1 ? u->name : u->name + std::to_string(n);
        a.uf = u;
        a.var = make_var(a.name, VarRole::Buffer, Int64);
        a.count_var = make_var(a.name + "_count", VarRole::Local, Int64);
        a.expected_count = flatten_layout(ctx.aux, u->aux->layout).size;
        args.push_back(a);
    }
    auto add_tensor = [&](const TensorPtr &t, ModuleArg::Kind k) {
        const TensorStorage &st = storage.at(t.get());
        ModuleArg a;
        a.kind = k;
        a.name = t->name;
        a.tensor = t;
        a.var = st.buffer;
        a.count_var = make_var(t->name + "_count", VarRole::Local, Int64);
        a.expected_count = st.flat.size;
        a.layout = describe_storage(ctx.aux, *t, st.flat, st.layout, "");
        args.push_back(a);
    };
    for (auto &t : ctx.inputs)
        add_tensor(t, ModuleArg::Kind::Input);
    for (auto &t : ctx.outputs)
        add_tensor(t, ModuleArg::Kind::Output);
    return args;
}

} // namespace cora::ir
