/** \file Helpers shared by the front end's files (Primitives.h). */
#include "front/Primitives.h"

#include <algorithm>

#include "formats/ragged/StorageLayout.h"
#include "front/Schedule.h"
#include "util/Error.h"

namespace cora::front {

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
    t->type = type;
    t->is_input = input;
    t->domain = to_layout(shape);
    t->storage = t->domain;
    ir::validate_layout(t->domain, "tensor '" + name + "'");
    return t;
}

void require_storage_owner(const ir::TensorNode &t, const char *what) {
    if (ir::TensorPtr head = ir::split_head(t))
        throw_compile_error(what, " of '", t.name, "': it is the tail of an op split and writes the storage of '",
                            head->name, "'; change the storage of '", head->name, "' instead");
}

bool is_live_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    std::vector<DimPtr> live = final_loops(t, /*with_reduction_dim=*/true);
    return std::any_of(live.begin(), live.end(), [&](const DimPtr &l) { return l.get() == d; });
}

void claim_reduction_loop(ir::TensorNode &t, const Dim &d) {
    if (d.node().get() == reduction_dim(t)) mutable_schedule(t).reduction_loop = d.node();
}

void reject_reduction_loop(const ir::TensorNode &t, const Dim &d, const char *what, const char *why) {
    if (is_reduction_loop(t, d.node().get()))
        throw_compile_error(what, " of '", d.name(), "' in Func '", t.name, "': it is a reduction loop (", why,
                            "); apply it to a loop over the Func's dims");
}

} // namespace cora::front
