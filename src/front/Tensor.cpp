/** \file The objects behind Tensor and Func. Definitions are recorded as data; all checking
 * that needs the whole pipeline (bounds, extents) happens in lower/ValidatePipeline. */
#include "cora/Tensor.h"

#include <atomic>

#include "analysis/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora {

namespace {
std::atomic<uint64_t> next_tensor_id{1};

ir::Layout to_layout(const Shape &shape) {
    ir::Layout l;
    for (const DimExtent &d : shape)
        l.push_back(ir::LayoutDim{d.dim.node(), d.extent});
    return l;
}
Shape to_shape(const ir::Layout &l) {
    Shape s;
    for (const ir::LayoutDim &d : l)
        s.emplace_back(Dim(d.dim), d.extent);
    return s;
}
std::shared_ptr<ir::TensorNode> make_tensor(const std::string &name, const Shape &shape, Type type, bool input) {
    if (name.empty()) throw_compile_error("a tensor needs a non-empty name");
    if (type.is_bool()) throw_compile_error("tensor '", name, "': boolean element type is not supported");
    auto t = std::make_shared<ir::TensorNode>();
    t->name = name;
    t->id = next_tensor_id++;
    t->type = type;
    t->is_input = input;
    t->domain = to_layout(shape);
    t->storage = t->domain;
    ir::validate_layout(t->domain, "tensor '" + name + "'");
    return t;
}
} // namespace

Tensor::Tensor(const std::string &name, const Shape &shape, Type type) : node_(make_tensor(name, shape, type, true)) {}
const std::string &Tensor::name() const { return node_->name; }
Type Tensor::type() const { return node_->type; }
size_t Tensor::dimensions() const { return node_->storage.size(); }
Shape Tensor::shape() const { return to_shape(node_->storage); }
Expr Tensor::access(const std::vector<Expr> &indices) const { return ir::Access::make(node_, indices); }

Func::Func(const std::string &name, const Shape &domain, Type type) { node_ = make_tensor(name, domain, type, false); }

Func &Func::compute(const Expr &value) {
    if (!value.defined()) throw_compile_error("Func '", name(), "': compute() with an undefined expression");
    if (node_->value.defined()) throw_compile_error("Func '", name(), "' is already defined");
    Expr v = value;
    if (v.type() != node_->type) {
        if (v.as<ir::IntImm>() || v.as<ir::FloatImm>()) {
            double c = v.as<ir::IntImm>() ? (double)v.as<ir::IntImm>()->value : v.as<ir::FloatImm>()->value;
            v = node_->type.is_float() ? ir::FloatImm::make(c, node_->type) : ir::IntImm::make((int64_t)c, node_->type);
        } else {
            throw_compile_error("Func '", name(), "' holds ", node_->type.str(), " but its definition ", ir::print(v),
                                " is ", v.type().str(), "; use cast()");
        }
    }
    bool self_reference = false;
    ir::visit_exprs(v, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) self_reference |= a->tensor.get() == node_.get();
    });
    if (self_reference) throw_compile_error("Func '", name(), "' reads itself in its own definition; use a reduction");
    node_->value = v;
    return *this;
}

Func &Func::store_in(const Shape &storage) {
    ir::Layout l = to_layout(storage);
    if (l.size() != node_->domain.size())
        throw_compile_error("Func '", name(), "': storage layout has ", l.size(), " dims, the loop domain has ",
                            node_->domain.size());
    for (size_t i = 0; i < l.size(); i++) {
        if (l[i].dim != node_->domain[i].dim)
            throw_compile_error("Func '", name(), "': storage dim ", i, " is '", l[i].dim->name,
                                "' but the loop domain has '", node_->domain[i].dim->name, "' there");
    }
    ir::validate_layout(l, "storage of '" + name() + "'");
    node_->storage = l;
    return *this;
}

bool Func::defined() const { return node_->value.defined(); }
Shape Func::domain() const { return to_shape(node_->domain); }
std::vector<Expr> Func::dim_vars() const {
    std::vector<Expr> v;
    for (auto &d : node_->domain)
        v.push_back(ir::var_expr(d.dim->var));
    return v;
}
void Func::arity_error(size_t got) const {
    throw_compile_error("compute() lambda of '", name(), "' takes ", got, " argument(s) but its domain has ",
                        node_->domain.size(), " dim(s)");
}

} // namespace cora

namespace cora {

namespace {
/** Dims that currently name a loop of `t` (domain dims not yet split, plus split results). */
bool is_live_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    bool live = false;
    for (auto &ld : t.domain)
        live = live || ld.dim.get() == d;
    for (auto &s : t.schedule.splits) {
        if (s.parent.get() == d) live = false;
        if (s.outer.get() == d || s.inner.get() == d) live = true;
    }
    return live;
}
bool is_known_dim(const ir::TensorNode &t, const ir::DimNode *d) {
    for (auto &ld : t.domain)
        if (ld.dim.get() == d) return true;
    for (auto &s : t.schedule.splits)
        if (s.outer.get() == d || s.inner.get() == d) return true;
    return false;
}
} // namespace

Func &Func::split(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor) {
    if (factor <= 0)
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': factor must be positive, got ", factor);
    if (!is_live_loop(*node_, d.node().get()))
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': '", d.name(),
                            "' is not a loop of this Func (already split, or not in its domain)");
    if (outer.same_as(inner))
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': outer and inner must be different dims");
    for (const Dim *n : {&outer, &inner}) {
        if (is_known_dim(*node_, n->node().get()))
            throw_compile_error("split of '", d.name(), "' in Func '", name(), "': dim '", n->name(),
                                "' already names a loop of this Func");
    }
    node_->schedule.splits.push_back(ir::ScheduleSplit{d.node(), outer.node(), inner.node(), factor});
    return *this;
}

Func &Func::reorder(const std::vector<Dim> &outermost_first) {
    for (size_t i = 0; i < outermost_first.size(); i++) {
        const Dim &d = outermost_first[i];
        if (!is_known_dim(*node_, d.node().get()))
            throw_compile_error("reorder in Func '", name(), "': '", d.name(), "' is not a loop of this Func");
        for (size_t j = 0; j < i; j++)
            if (outermost_first[j].same_as(d))
                throw_compile_error("reorder in Func '", name(), "': '", d.name(), "' is listed twice");
    }
    node_->schedule.order.clear();
    for (const Dim &d : outermost_first)
        node_->schedule.order.push_back(d.node());
    return *this;
}

static Func &annotate(Func &f, const std::shared_ptr<ir::TensorNode> &node, const Dim &d, ir::LoopAnnotation a,
                      const char *what) {
    if (!is_known_dim(*node, d.node().get()))
        throw_compile_error(what, " in Func '", node->name, "': '", d.name(), "' is not a loop of this Func");
    for (auto &[dim, ann] : node->schedule.annotations)
        if (dim == d.node())
            throw_compile_error(what, " in Func '", node->name, "': loop '", d.name(), "' is already marked");
    node->schedule.annotations.emplace_back(d.node(), a);
    return f;
}
Func &Func::parallel(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Parallel, "parallel"); }
Func &Func::vectorize(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Vectorize, "vectorize"); }
Func &Func::unroll(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Unroll, "unroll"); }

} // namespace cora
