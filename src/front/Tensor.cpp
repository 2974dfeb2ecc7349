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
    for (const DimExtent &d : shape) l.push_back(ir::LayoutDim{d.dim.node(), d.extent});
    return l;
}
Shape to_shape(const ir::Layout &l) {
    Shape s;
    for (const ir::LayoutDim &d : l) s.emplace_back(Dim(d.dim), d.extent);
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
}  // namespace

Tensor::Tensor(const std::string &name, const Shape &shape, Type type)
    : node_(make_tensor(name, shape, type, true)) {}
const std::string &Tensor::name() const { return node_->name; }
Type Tensor::type() const { return node_->type; }
size_t Tensor::dimensions() const { return node_->storage.size(); }
Shape Tensor::shape() const { return to_shape(node_->storage); }
Expr Tensor::access(const std::vector<Expr> &indices) const { return ir::Access::make(node_, indices); }

Func::Func(const std::string &name, const Shape &domain, Type type) {
    node_ = make_tensor(name, domain, type, false);
}

Func &Func::compute(const Expr &value) {
    if (!value.defined()) throw_compile_error("Func '", name(), "': compute() with an undefined expression");
    if (node_->value.defined()) throw_compile_error("Func '", name(), "' is already defined");
    Expr v = value;
    if (v.type() != node_->type) {
        if (v.as<ir::IntImm>() || v.as<ir::FloatImm>()) {
            double c = v.as<ir::IntImm>() ? (double)v.as<ir::IntImm>()->value : v.as<ir::FloatImm>()->value;
            v = node_->type.is_float() ? ir::FloatImm::make(c, node_->type)
                                       : ir::IntImm::make((int64_t)c, node_->type);
        } else {
            throw_compile_error("Func '", name(), "' holds ", node_->type.str(), " but its definition ",
                                ir::print(v), " is ", v.type().str(), "; use cast()");
        }
    }
    bool self_reference = false;
    ir::visit_exprs(v, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) self_reference |= a->tensor.get() == node_.get();
    });
    if (self_reference)
        throw_compile_error("Func '", name(), "' reads itself in its own definition; use a reduction");
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
    for (auto &d : node_->domain) v.push_back(ir::var_expr(d.dim->var));
    return v;
}
void Func::arity_error(size_t got) const {
    throw_compile_error("compute() lambda of '", name(), "' takes ", got, " argument(s) but its domain has ",
                        node_->domain.size(), " dim(s)");
}

}  // namespace cora
