/** \file The objects behind Tensor and Func: construction, definitions and storage layouts.
 * Definitions are recorded as data; all checking that needs the whole pipeline (bounds, extents)
 * happens in lower/ValidatePipeline. The schedule primitives are in the files named
 * *Primitives.cpp. */
#include "cora/Tensor.h"

#include "formats/ragged/StorageLayout.h"
#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

Tensor::Tensor(const std::string &name, const Shape &shape, Type type) : node_(make_tensor(name, shape, type, true)) {}
const std::string &Tensor::name() const { return node_->name; }
Type Tensor::type() const { return node_->type; }
size_t Tensor::dimensions() const { return node_->storage.size(); }
Shape Tensor::shape() const { return to_shape(node_->storage); }
Expr Tensor::access(const std::vector<Expr> &indices) const {
    if (indices.size() != node_->storage.size())
        throw_compile_error("tensor '", node_->name, "' has ", node_->storage.size(), " dimension(s), accessed with ",
                            indices.size(), " index(es)");
    for (size_t i = 0; i < indices.size(); i++)
        if (!indices[i].defined() || !indices[i].type().is_int())
            throw_compile_error("index ", i, " of '", node_->name, "' (dim '", node_->storage[i].dim->name,
                                "') must be an integer expression");
    return ir::Access::make(node_, indices);
}

Tensor &Tensor::index_range(int64_t min_value, int64_t max_value) {
    if (!node_->is_input)
        throw_compile_error("index_range of '", node_->name,
                            "': only an input tensor can declare a value range (a Func's values are computed)");
    if (node_->type != Int32 && node_->type != Int64)
        throw_compile_error("index_range of '", node_->name, "': the tensor holds ", node_->type.str(),
                            "; an index tensor holds integers (Int32 or Int64)");
    if (min_value > max_value)
        throw_compile_error("index_range of '", node_->name, "': min_value ", min_value, " > max_value ", max_value);
    node_->has_value_range = true;
    node_->min_value = min_value;
    node_->max_value = max_value;
    return *this;
}

Tensor &Tensor::index_values(const std::vector<int32_t> &values) {
    if (!node_->has_value_range)
        throw_compile_error("index_values of '", node_->name,
                            "': declare the tensor's index_range first (the kernel's checks and the prover use it)");
    for (size_t i = 0; i < values.size(); i++)
        if (values[i] < node_->min_value || values[i] > node_->max_value)
            throw_compile_error("index_values of '", node_->name, "': value ", values[i], " at packed position ", i,
                                " is outside its index_range [", node_->min_value, ", ", node_->max_value, "]");
    node_->static_values = std::make_shared<const std::vector<int64_t>>(values.begin(), values.end());
    return *this;
}

const std::vector<int64_t> *Tensor::static_values() const { return node_->static_values.get(); }

Func::Func(const std::string &name, const Shape &domain, Type type) { node_ = make_tensor(name, domain, type, false); }

Func &Func::compute(const Expr &value, const char *file, int line) {
    if (!value.defined()) throw_compile_error("Func '", name(), "': compute() with an undefined expression");
    if (node_->value.defined()) throw_compile_error("Func '", name(), "' is already defined");
    Expr v = value;
    const Type value_type = node_->type.value_type(); // a float16 Func is defined by a float32 value
    if (v.type() != value_type) {
        if (v.as<ir::IntImm>() || v.as<ir::FloatImm>()) {
            double c = v.as<ir::IntImm>() ? (double)v.as<ir::IntImm>()->value : v.as<ir::FloatImm>()->value;
            v = value_type.is_float() ? ir::FloatImm::make(c, value_type) : ir::IntImm::make((int64_t)c, value_type);
        } else {
            throw_compile_error("Func '", name(), "' holds ", node_->type.str(), " but its definition ", ir::print(v),
                                " is ", v.type().str(), "; use cast()",
                                node_->type.is_storage_only() ? " (a float16 Func is defined by a float32 value)" : "");
        }
    }
    bool self_reference = false;
    ir::visit_exprs(v, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) self_reference |= a->tensor.get() == node_.get();
    });
    if (self_reference) throw_compile_error("Func '", name(), "' reads itself in its own definition; use a reduction");
    node_->value = v;
    if (file && *file) { // the last two path components: enough to find it, short enough to read
        std::string path = file;
        size_t cut = path.rfind('/');
        if (cut != std::string::npos && cut > 0) cut = path.rfind('/', cut - 1);
        node_->defined_at = (cut == std::string::npos ? path : path.substr(cut + 1)) + ":" + std::to_string(line);
    }
    return *this;
}

Func &Func::store_in(const Shape &storage) {
    require_storage_owner(*node_, "store_in");
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
    if (!node_->storage_transforms.empty())
        throw_compile_error("Func '", name(), "': store_in() after a storage transform; call store_in() first");
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
