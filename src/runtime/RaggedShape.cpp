/** \file The ragged shape and the host prelude. Aux arrays are built on first use by running
 * their kind's IR builder (AuxKind::build, analysis/AuxKind.h) in the interpreter — the same
 * statements an AOT kernel compiles to build its own arrays, so both paths follow one
 * definition. A slice-size expression is evaluated once per array element, never per tensor
 * element, and the result is cached by the array's structural key, so every kernel using the
 * same raggedness shares it. */
#include <algorithm>
#include <climits>
#include <map>
#include <mutex>

#include "analysis/AuxKind.h"
#include "analysis/Interpreter.h"
#include "cora/Runtime.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Schedule.h"
#include "runtime/RaggedShapeImpl.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

Interpreter RaggedShape::Impl::interpreter() const {
    Interpreter in;
    in.ints = params;
    in.length_value = [this](const UFNode *fn, int64_t i) -> int64_t {
        auto it = lengths.find(fn);
        if (it == lengths.end()) throw_runtime_error(input_array_title(*fn), " is not set in the RaggedShape");
        if (i < 0 || i >= (int64_t)it->second.size())
            throw_runtime_error(input_array_title(*fn), " has ", it->second.size(), " elements, index ", i,
                                " was needed (is its count consistent with the params?)");
        return it->second[i];
    };
    in.aux_value = [this](const UFNode *fn, const std::vector<int64_t> &idx) { return aux_at(fn, idx); };
    return in;
}

const RaggedShape::Impl::FlatAuxLayout &RaggedShape::Impl::flat_aux_layout(const AuxSpec &spec) const {
    auto it = aux_layouts.find(spec.key);
    if (it == aux_layouts.end()) {
        AuxTable table; // the layout's own aux arrays, shared with others through their keys
        FlatAuxLayout entry{flatten_layout(table, spec.layout), {}};
        for (const LayoutDim &d : spec.layout)
            entry.vars.push_back(d.dim->var);
        it = aux_layouts.emplace(spec.key, std::move(entry)).first;
    }
    return it->second;
}

int64_t RaggedShape::Impl::aux_at(const UFNode *fn, const std::vector<int64_t> &idx) const {
    const std::vector<int64_t> &a = build(fn);
    const FlatAuxLayout *flat;
    {
        std::lock_guard<std::mutex> lock(mu);
        flat = &flat_aux_layout(*fn->aux);
    }
    Interpreter in = interpreter();
    for (size_t k = 0; k < idx.size(); k++)
        in.ints[flat->vars.at(k).get()] = idx[k];
    int64_t off = in.eval_int(flat->flat.offset);
    CORA_CHECK(off >= 0 && off < (int64_t)a.size(), "aux index out of range for ", fn->name);
    return a[off];
}

const std::vector<int64_t> &RaggedShape::Impl::build(const UFNode *fn) const {
    const AuxSpec &spec = *fn->aux;
    {
        std::lock_guard<std::mutex> lock(mu);
        auto it = aux.find(spec.key);
        if (it != aux.end()) return it->second;
    }
    // Dependencies (the aux layout's own offsets, a fusion map's prefix sum) are built by the
    // recursive calls the interpreter makes through aux_value, without the lock held.
    std::vector<int64_t> out;
    try {
        AuxTable table; // the layout's own aux arrays, shared with others through their keys
        Interpreter in = interpreter();
        // The flattened layout is cached by key (aux_at reads it too): flattening simplifies IR,
        // which cost more than building a tile list's small arrays.
        Expr size_expr;
        {
            std::lock_guard<std::mutex> lock(mu);
            size_expr = flat_aux_layout(spec).flat.size;
        }
        int64_t size = in.eval_int(size_expr);
        if (size < 0) throw_runtime_error("the layout has a negative size, ", size);
        out.resize((size_t)size);
        VarPtr buffer = make_var(fn->name, VarRole::Buffer, Int64);
        in.int_buffers[buffer.get()] = &out;
        // The builder reads only the spec through the symbol; a non-owning pointer to `fn`, which
        // the caller keeps alive, stands in for the shared one.
        std::shared_ptr<const UFNode> symbol(std::shared_ptr<const UFNode>(), fn);
        HostAuxInputs host{[&](const Expr &e) { return in.eval_int(e); },
                           [&](const UFNode *t) -> const std::vector<int32_t> & {
                               auto it = lengths.find(t);
                               if (it == lengths.end())
                                   throw_runtime_error(input_array_title(*t), " is not set in the RaggedShape");
                               return it->second;
                           },
                           [&](const UFNode *a) -> const std::vector<int64_t> & { return build(a); }};
        if (!aux_kind(spec).host_build(host, out))
            in.exec(aux_kind(spec).build(AuxArray{symbol, fn->name, buffer}, table));
    } catch (const RuntimeError &e) {
        // Say which array failed once, at the innermost build (dependencies nest).
        std::string what = e.what();
        if (what.find(" (while building aux array '") != std::string::npos) throw;
        throw_runtime_error(what, " (while building aux array '", fn->name, "' of the ragged shape)");
    }
    std::lock_guard<std::mutex> lock(mu);
    return aux.emplace(spec.key, std::move(out)).first->second;
}

RaggedShape::RaggedShape() : impl_(std::make_shared<Impl>()) {}

RaggedShape &RaggedShape::set(const Param &p, int64_t value) {
    if (value < p.min_value() || value > p.max_value())
        throw_runtime_error("param '", p.name(), "' = ", value, " is outside its declared range [", p.min_value(), ", ",
                            p.max_value(), "]");
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->params[p.expr().as<VarNode>()] = value;
    impl_->aux.clear();
    return *this;
}

void RaggedShape::Impl::bind_input_array(const UFNode &fn, std::vector<int32_t> values) {
    // The range of all values first (a loop the compiler vectorises: a mask of H x W is bound for
    // every batch), then the first bad element only when there is one.
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t v : values) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    bind_input_array(fn, std::move(values), lo, hi);
}

void RaggedShape::Impl::bind_input_array(const UFNode &fn, std::vector<int32_t> values, int32_t lo, int32_t hi) {
    if (!values.empty() && (lo < fn.min_value || hi > fn.max_value))
        for (size_t i = 0; i < values.size(); i++) {
            if (values[i] < fn.min_value || values[i] > fn.max_value)
                throw_runtime_error(input_array_title(fn), ": element ", i, fn.dims.empty() ? "" : " (row-major)",
                                    " is ", values[i], ", expected a value in [", fn.min_value, ", ", fn.max_value,
                                    "]");
        }
    // The element count is checked where the params it depends on are known to be set: before
    // any kernel, size or aux array reads the array (validate_counts).
    std::lock_guard<std::mutex> lock(mu);
    lengths[&fn] = std::move(values);
    aux.clear();
}

RaggedShape &RaggedShape::set(const LengthArray &len, std::vector<int32_t> lengths) {
    impl_->bind_input_array(*len.node(), std::move(lengths));
    return *this;
}

RaggedShape &RaggedShape::set(const ShapeTensor &t, std::vector<int32_t> values) {
    impl_->bind_input_array(*t.node(), std::move(values));
    return *this;
}

RaggedShape &RaggedShape::set(const ShapeTensor &t, const uint8_t *values, int64_t count) {
    if (count < 0) throw_runtime_error("shape tensor '", t.name(), "': negative element count ", count);
    if (count > 0 && values == nullptr) throw_runtime_error("shape tensor '", t.name(), "': null data");
    // The range over the bytes (16 or more per vector instruction even on baseline x86-64, where
    // an int32 min/max is scalar: a 160 x 160 mask took 6 us that way), then the widening copy.
    uint8_t lo = UINT8_MAX, hi = 0;
    for (int64_t i = 0; i < count; i++) {
        lo = std::min(lo, values[i]);
        hi = std::max(hi, values[i]);
    }
    std::vector<int32_t> wide(values, values + count);
    if (count == 0) return set(t, std::move(wide));
    impl_->bind_input_array(*t.node(), std::move(wide), lo, hi);
    return *this;
}

const std::vector<int32_t> &RaggedShape::values(const ShapeTensor &t) const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->lengths.find(t.node().get());
    if (it == impl_->lengths.end()) throw_runtime_error("shape tensor '", t.name(), "' is not set in the RaggedShape");
    return it->second;
}

template <typename T>
static std::vector<int32_t> lengths_from_offsets(const LengthArray &len, const std::vector<T> &offsets) {
    if (offsets.empty()) throw_runtime_error("offsets for '", len.name(), "' are empty; expected B+1 entries");
    if (offsets[0] != 0) throw_runtime_error("offsets for '", len.name(), "' must start at 0, got ", offsets[0]);
    std::vector<int32_t> l(offsets.size() - 1);
    for (size_t i = 0; i + 1 < offsets.size(); i++) {
        // Offsets decrease (d < 0) or jump by more than a length can be; either way the
        // difference is computed without overflow (int64 offsets may span the whole range).
        int64_t d = 0;
        if (__builtin_sub_overflow((int64_t)offsets[i + 1], (int64_t)offsets[i], &d))
            d = offsets[i + 1] < offsets[i] ? -1 : INT64_MAX;
        if (d < 0)
            throw_runtime_error("offsets for '", len.name(), "' decrease at entry ", i + 1, " (", offsets[i], " -> ",
                                offsets[i + 1], ")");
        if (d > INT32_MAX)
            throw_runtime_error("offsets for '", len.name(), "': length ", d, " at ", i, " exceeds int32");
        l[i] = (int32_t)d;
    }
    return l;
}

RaggedShape &RaggedShape::set_offsets(const LengthArray &len, const std::vector<int32_t> &offsets) {
    return set(len, lengths_from_offsets(len, offsets));
}
RaggedShape &RaggedShape::set_offsets(const LengthArray &len, const std::vector<int64_t> &offsets) {
    return set(len, lengths_from_offsets(len, offsets));
}

int64_t RaggedShape::value(const Param &p) const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->params.find(p.expr().as<VarNode>());
    if (it == impl_->params.end()) throw_runtime_error("param '", p.name(), "' is not set in the RaggedShape");
    return it->second;
}

const std::vector<int32_t> &RaggedShape::lengths(const LengthArray &len) const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->lengths.find(len.node().get());
    if (it == impl_->lengths.end())
        throw_runtime_error("length array '", len.name(), "' is not set in the RaggedShape");
    return it->second;
}

std::vector<int64_t> RaggedShape::offsets(const LengthArray &len) const {
    const std::vector<int32_t> &l = lengths(len);
    std::vector<int64_t> o(l.size() + 1, 0);
    for (size_t i = 0; i < l.size(); i++)
        o[i + 1] = o[i] + l[i];
    return o;
}

void RaggedShape::Impl::validate_counts() const {
    // Length counts must match the params before anything indexes the arrays.
    for (auto &[fn, l] : lengths) {
        Interpreter in = interpreter();
        int64_t want = in.eval_int(fn->count);
        if (want != (int64_t)l.size())
            throw_runtime_error(input_array_title(*fn), " has ", l.size(), " elements, expected ", want, " (",
                                print(fn->count), ")");
    }
}

int64_t RaggedShape::eval(const Expr &e) const {
    impl_->validate_counts();
    Interpreter in = impl_->interpreter();
    return in.eval_int(e);
}

int64_t RaggedShape::Impl::storage_size(const TensorNode &t) const {
    validate_counts();
    Interpreter in = interpreter();
    AuxTable table;
    return in.eval_int(flatten_layout(table, physical_layout(table, t)).size);
}

int64_t RaggedShape::size_of(const Tensor &t) const { return impl_->storage_size(*t.node()); }

void RaggedShape::Impl::for_each_element(const TensorNode &t,
                                         const std::function<void(const std::vector<int64_t> &, int64_t)> &f) const {
    validate_counts();
    Interpreter in = interpreter();
    std::vector<Expr> logical;
    for (auto &ld : t.storage)
        logical.push_back(var_expr(ld.dim->var));
    AuxTable table;
    Layout phys = physical_layout(table, t);
    Expr offset = flat_offset(flatten_layout(table, phys), phys, physical_indices(table, t, logical));
    const Layout &dom = t.domain;
    if (dom.empty()) {
        f({}, in.eval_int(offset));
        return;
    }
    // Unless storage dims were split or reordered, the innermost dim has unit stride: one
    // offset evaluation per row.
    bool unit_stride = std::all_of(t.storage_transforms.begin(), t.storage_transforms.end(),
                                   [](const StorageTransform &st) { return st.kind == StorageTransform::Kind::Fuse; });
    std::vector<int64_t> idx(dom.size());
    std::function<void(size_t)> rec = [&](size_t k) {
        const VarNode *v = dom[k].dim->var.get();
        int64_t n = in.eval_int(dom[k].extent);
        if (k + 1 == dom.size() && unit_stride) {
            in.ints[v] = 0;
            int64_t base = in.eval_int(offset);
            for (int64_t i = 0; i < n; i++) {
                idx[k] = i;
                f(idx, base + i);
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                idx[k] = i;
                in.ints[v] = i;
                if (k + 1 == dom.size())
                    f(idx, in.eval_int(offset));
                else
                    rec(k + 1);
            }
        }
        in.ints.erase(v);
    };
    rec(0);
}

const std::vector<int64_t> &RaggedShape::Impl::aux_array(const UFNode *fn) const {
    CORA_CHECK(fn->kind == UFKind::Aux, "aux_array of a non-aux function ", fn->name);
    validate_counts();
    return build(fn);
}

const std::shared_ptr<RaggedShape::Impl> &shape_impl(const RaggedShape &shape) { return shape.impl_; }

size_t RaggedShape::aux_array_count() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->aux.size();
}

std::vector<std::array<int32_t, 3>> RaggedShape::active_tiles(const ActiveTiles &tiles) const {
    const TileList &list = *tiles.node();
    const std::vector<int64_t> &count = impl_->aux_array(list.count.get());
    const std::vector<int64_t> &order = impl_->aux_array(list.order.get());
    CORA_CHECK(count.size() == 1 && count[0] >= 0 && 3 * count[0] <= (int64_t)order.size(), "active-tile list sizes");
    std::vector<std::array<int32_t, 3>> out((size_t)count[0]);
    for (size_t k = 0; k < out.size(); k++)
        out[k] = {(int32_t)order[3 * k], (int32_t)order[3 * k + 1], (int32_t)order[3 * k + 2]};
    return out;
}

} // namespace cora
