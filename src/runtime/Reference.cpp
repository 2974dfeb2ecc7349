/** \file Reference evaluation. Each tensor is held in a dense box (padded to the largest
 * index seen in each dim) with a presence mask; a read outside a tensor's domain is an error.
 * Inputs are read at the flat storage offset of each logical element. */
#include <array>
#include <map>

#include "analysis/PipelineOrder.h"
#include "cora/Reference.h"
#include "cora_runtime.h"
#include "ir/IRPrinter.h"
#include "runtime/RaggedShapeImpl.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

namespace {

struct Box {
    std::vector<int64_t> dims, strides;
    std::vector<double> values;
    std::vector<char> present;

    int64_t index(const int64_t *idx, size_t n) const {
        if (n != dims.size()) return -1;
        int64_t p = 0;
        for (size_t k = 0; k < n; k++) {
            if (idx[k] < 0 || idx[k] >= dims[k]) return -1;
            p += idx[k] * strides[k];
        }
        return p;
    }
    int64_t index(const std::vector<int64_t> &idx) const { return index(idx.data(), idx.size()); }
};

/** Enumerate a layout; returns the visited indices in order and sizes the box. */
std::vector<std::vector<int64_t>> enumerate(Interpreter &in, const Layout &l, Box &box) {
    std::vector<std::vector<int64_t>> all;
    in.for_each_index(l, [&](const std::vector<int64_t> &idx) { all.push_back(idx); });
    box.dims.assign(l.size(), 0);
    for (auto &idx : all)
        for (size_t k = 0; k < idx.size(); k++)
            box.dims[k] = std::max(box.dims[k], idx[k] + 1);
    box.strides.assign(l.size(), 1);
    for (int k = (int)l.size() - 2; k >= 0; k--)
        box.strides[k] = box.strides[k + 1] * box.dims[k + 1];
    int64_t n = 1;
    for (int64_t d : box.dims)
        n *= d;
    box.values.assign((size_t)n, 0.0);
    box.present.assign((size_t)n, 0);
    return all;
}

double read_buffer(const Buffer &b, int64_t i) {
    Type t = b.type();
    if (t == Float32) return b.data<float>()[i];
    if (t == Float64) return b.data<double>()[i];
    if (t == Float16) return cora_half_to_float(b.data<uint16_t>()[i]);
    if (t == Int32) return b.data<int32_t>()[i];
    return (double)b.data<int64_t>()[i];
}

} // namespace

std::vector<std::vector<double>> reference_evaluate(const Pipeline &p, const RaggedShape &shape,
                                                    const std::vector<std::pair<Tensor, const Buffer *>> &inputs) {
    std::vector<TensorPtr> outs, ins;
    for (const Func &f : p.outputs())
        outs.push_back(f.node());
    std::vector<TensorPtr> funcs = pipeline_order(outs, &ins);
    shape_impl(shape)->validate_counts();
    Interpreter in = shape_impl(shape)->interpreter();
    std::map<const TensorNode *, Box> boxes;

    for (const TensorPtr &t : ins) {
        const Buffer *buf = nullptr;
        for (auto &[tensor, b] : inputs)
            if (tensor.node() == t) buf = b;
        if (!buf) throw_runtime_error("reference_evaluate: no buffer bound for input '", t->name, "'");
        Box &box = boxes[t.get()];
        enumerate(in, t->domain, box);
        int64_t want = shape_impl(shape)->storage_size(*t);
        if (want != buf->size())
            throw_runtime_error("reference_evaluate: buffer for '", t->name, "' has ", buf->size(),
                                " elements, expected ", want);
        shape_impl(shape)->for_each_element(*t, [&](const std::vector<int64_t> &idx, int64_t offset) {
            int64_t at = box.index(idx);
            box.values[at] = read_buffer(*buf, offset);
            box.present[at] = 1;
        });
    }
    // The boxes of the tensors read lately: a product reads two or three tensors in turn, and a map
    // lookup per read was a tenth of the evaluator's time. (A map's entries stay put as it grows.)
    std::array<std::pair<const TensorNode *, const Box *>, 4> recent{};
    size_t next_recent = 0;
    in.tensor_value = [&](const TensorNode *t, const int64_t *idx, size_t n) {
        const Box *found = nullptr;
        for (const auto &[rt, rb] : recent)
            if (rt == t) found = rb;
        if (!found) {
            found = &boxes.at(t);
            recent[next_recent] = {t, found};
            next_recent = (next_recent + 1) % recent.size();
        }
        const Box &box = *found;
        int64_t at = box.index(idx, n);
        if (at < 0 || !box.present[at]) {
            std::string s;
            for (size_t k = 0; k < n; k++)
                s += (s.empty() ? "" : ", ") + std::to_string(idx[k]);
            throw InternalError("reference: read of " + t->name + "[" + s + "] outside its domain");
        }
        return box.values[at];
    };

    std::map<const TensorNode *, std::vector<double>> computed;
    for (const TensorPtr &f : funcs) {
        Box box;
        auto all = enumerate(in, f->domain, box);
        std::vector<double> flat;
        flat.reserve(all.size());
        for (auto &idx : all) {
            for (size_t k = 0; k < idx.size(); k++)
                in.ints[f->domain[k].dim->var.get()] = idx[k];
            double v = in.eval(f->value);
            if (f->type == Float32) v = (double)(float)v;
            if (f->type == Float16) v = (double)cora_half_to_float(cora_float_to_half((float)v)); // rounded as stored
            int64_t at = box.index(idx);
            box.values[at] = v;
            box.present[at] = 1;
            flat.push_back(v);
        }
        for (auto &ld : f->domain)
            in.ints.erase(ld.dim->var.get());
        boxes[f.get()] = std::move(box);
        computed[f.get()] = std::move(flat);
    }
    std::vector<std::vector<double>> results;
    for (const TensorPtr &o : outs)
        results.push_back(computed.at(o.get()));
    return results;
}

} // namespace cora
