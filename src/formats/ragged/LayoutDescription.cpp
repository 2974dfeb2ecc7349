/** \file Storage layouts in words: see LayoutDescription.h. */
#include "formats/ragged/LayoutDescription.h"

#include <sstream>

#include "analysis/AuxKind.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

namespace cora::ir {

Expr expand_prefix_sums(const Expr &e) {
    struct Expander : IRMutator {
        Expr mutate(const Expr &x) override {
            const UFCall *u = x.as<UFCall>();
            const AuxKind *kind = u ? aux_kind_of(*u->fn) : nullptr;
            if (!kind || !kind->is_prefix_sum()) return IRMutator::mutate(x);
            const AuxSpec &spec = *u->fn->aux;
            std::map<const VarNode *, Expr> outer;
            for (size_t k = 0; k + 1 < spec.layout.size(); k++)
                outer[spec.layout[k].dim->var.get()] = mutate(u->args[k]);
            const VarPtr &last = spec.layout.back().dim->var;
            VarPtr summed = make_var(last->name + "'", VarRole::Index, last->type);
            outer[last.get()] = var_expr(summed);
            return Reduce::make(ReduceOp::Sum, summed, mutate(u->args.back()),
                                mutate(substitute(*kind->prefix_summand(), outer)));
        }
        using IRMutator::mutate;
    } ex;
    return ex.mutate(e);
}

namespace {

std::string shown(const Expr &e) { return print(expand_prefix_sums(simplify(e))); }

std::string dims_text(const Layout &l) {
    std::string s;
    for (const LayoutDim &d : l)
        s += "[" + d.dim->name + " < " + shown(d.extent) + "]";
    return s;
}

} // namespace

std::string describe_storage(AuxTable &table, const TensorNode &t, const FlatLayout &flat, const Layout &physical,
                             const std::string &indent) {
    std::ostringstream os;
    std::vector<Expr> at;
    std::string index;
    for (const LayoutDim &d : t.domain) {
        at.push_back(var_expr(d.dim->var));
        index += (index.empty() ? "" : ", ") + d.dim->name;
    }
    os << indent << t.type.str() << " " << t.name << dims_text(t.domain) << "\n";
    os << indent << "element " << t.name << "(" << index
       << ") at offset: " << shown(flat_offset(flat, physical, physical_indices(table, t, at))) << "\n";
    bool transformed = !t.storage_transforms.empty();
    if (transformed)
        os << indent << "stored as " << dims_text(physical)
           << " (the storage order and blocks its storage transforms make)\n";
    for (size_t k = 0; k < t.domain.size(); k++)
        if (!equal(simplify(t.storage[k].extent), simplify(t.domain[k].extent)))
            os << indent << "dim " << t.domain[k].dim->name << " padded to " << shown(t.storage[k].extent)
               << " (padding elements are not data; a kernel may write them)\n";
    os << indent << "element count: " << shown(flat.size) << "\n";
    if (t.has_value_range)
        os << indent << "index tensor: every element in [" << t.min_value << ", " << t.max_value
           << "], checked on every call\n";
    if (t.static_values)
        os << indent << "values fixed when compiling (a static pattern of " << t.static_values->size()
           << " elements): the kernel was specialised to them and checks every element on every call\n";
    return os.str();
}

} // namespace cora::ir
