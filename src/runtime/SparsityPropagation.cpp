/** \file Sparsity propagation over layers with block-sparse weights (include/cora/SparsityPropagation.h):
 * known-zero features forward, unused features backward, to a fixed point; the weights keep the
 * blocks that can change an output. */
#include "cora/SparsityPropagation.h"

#include <sstream>

#include "util/Debug.h"
#include "util/Error.h"

namespace cora {

namespace {

bool maps_zero_to_zero(Activation a) { return a == Activation::None || a == Activation::ReLU || a == Activation::GELU; }

int64_t count(const std::vector<bool> &v) {
    int64_t n = 0;
    for (bool b : v)
        n += b;
    return n;
}

} // namespace

const SparsityGraph::Node &SparsityGraph::node(int t, const char *what) const {
    if (t < 0 || t >= (int)nodes_.size())
        throw_runtime_error("SparsityGraph::", what, ": no tensor ", t, " (the graph has ", nodes_.size(), ")");
    return nodes_[(size_t)t];
}

int SparsityGraph::add_node(Node n) {
    n.zero.resize((size_t)n.features, false);
    n.unused.assign((size_t)n.features, false);
    nodes_.push_back(std::move(n));
    propagated_ = false;
    return (int)nodes_.size() - 1;
}

int SparsityGraph::input(const std::string &name, int64_t features, std::vector<bool> known_zero) {
    if (features < 0) throw_runtime_error("SparsityGraph::input '", name, "': negative feature count ", features);
    if (!known_zero.empty() && (int64_t)known_zero.size() != features)
        throw_runtime_error("SparsityGraph::input '", name, "': known_zero has ", known_zero.size(),
                            " entries, expected ", features);
    Node n{name, Op::Input, features, {}, {}, false, false, false, std::move(known_zero), {}, {}};
    return add_node(std::move(n));
}

int SparsityGraph::linear(const std::string &name, int x, const BsrData &w, bool has_bias, Activation act) {
    const Node &in = node(x, "linear");
    w.validate();
    if (w.cols != in.features)
        throw_runtime_error("SparsityGraph::linear '", name, "': the weight has ", w.cols, " input columns but '",
                            in.name, "' has ", in.features, " features");
    Node n{name, Op::Linear, w.rows, {x}, w, has_bias, maps_zero_to_zero(act), false, {}, {}, {}};
    n.block_kept.assign((size_t)w.nnzb(), true);
    return add_node(std::move(n));
}

int SparsityGraph::elementwise(const std::string &name, int x, bool zero_preserving) {
    int64_t f = node(x, "elementwise").features;
    return add_node(Node{name, Op::Elementwise, f, {x}, {}, false, zero_preserving, false, {}, {}, {}});
}

int SparsityGraph::add(const std::string &name, int a, int b) {
    const Node &na = node(a, "add"), &nb = node(b, "add");
    if (na.features != nb.features)
        throw_runtime_error("SparsityGraph::add '", name, "': '", na.name, "' has ", na.features, " features, '",
                            nb.name, "' has ", nb.features);
    return add_node(Node{name, Op::Add, na.features, {a, b}, {}, false, false, false, {}, {}, {}});
}

void SparsityGraph::output(int t) {
    node(t, "output");
    nodes_[(size_t)t].is_output = true;
    propagated_ = false;
}

bool SparsityGraph::forward() {
    bool changed = false;
    for (Node &n : nodes_) {
        std::vector<bool> zero((size_t)n.features, false);
        switch (n.op) {
        case Op::Input: continue; // declared
        case Op::Linear: {
            const Node &x = nodes_[(size_t)n.args[0]];
            const BsrData &w = n.weight;
            std::vector<bool> row_has_block((size_t)w.row_blocks(), false);
            for (int64_t rb = 0; rb < w.row_blocks(); rb++)
                for (int32_t p = w.crow[(size_t)rb]; p < w.crow[(size_t)rb + 1]; p++) {
                    if (!n.block_kept[(size_t)p]) continue;
                    bool reads_only_zeros = true;
                    for (int64_t c = 0; c < w.block_cols && reads_only_zeros; c++)
                        reads_only_zeros = x.zero[(size_t)(w.col[(size_t)p] * w.block_cols + c)];
                    if (reads_only_zeros) {
                        n.block_kept[(size_t)p] = false; // its products are all exact zeros
                        changed = true;
                    } else {
                        row_has_block[(size_t)rb] = true;
                    }
                }
            if (!n.has_bias && n.zero_preserving)
                for (int64_t f = 0; f < n.features; f++)
                    zero[(size_t)f] = !row_has_block[(size_t)(f / w.block_rows)];
            break;
        }
        case Op::Elementwise:
            if (n.zero_preserving) zero = nodes_[(size_t)n.args[0]].zero;
            break;
        case Op::Add: {
            const Node &a = nodes_[(size_t)n.args[0]], &b = nodes_[(size_t)n.args[1]];
            for (int64_t f = 0; f < n.features; f++)
                zero[(size_t)f] = a.zero[(size_t)f] && b.zero[(size_t)f];
            break;
        }
        }
        if (zero != n.zero) {
            n.zero = std::move(zero);
            changed = true;
        }
    }
    return changed;
}

bool SparsityGraph::backward() {
    bool changed = false;
    std::vector<std::vector<bool>> used(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); i++)
        used[i].assign((size_t)nodes_[i].features, nodes_[i].is_output);
    // Ids are topological (a node's arguments come before it): by the time a node is visited,
    // every consumer has added its uses.
    for (size_t i = nodes_.size(); i-- > 0;) {
        Node &n = nodes_[i];
        const std::vector<bool> &u = used[i];
        switch (n.op) {
        case Op::Input: break;
        case Op::Linear: {
            std::vector<bool> &ux = used[(size_t)n.args[0]];
            const BsrData &w = n.weight;
            for (int64_t rb = 0; rb < w.row_blocks(); rb++) {
                bool row_used = false;
                for (int64_t r = 0; r < w.block_rows && !row_used; r++)
                    row_used = u[(size_t)(rb * w.block_rows + r)];
                for (int32_t p = w.crow[(size_t)rb]; p < w.crow[(size_t)rb + 1]; p++) {
                    if (!n.block_kept[(size_t)p]) continue;
                    if (!row_used) {
                        n.block_kept[(size_t)p] = false; // writes only outputs nobody reads
                        changed = true;
                        continue;
                    }
                    for (int64_t c = 0; c < w.block_cols; c++)
                        ux[(size_t)(w.col[(size_t)p] * w.block_cols + c)] = true;
                }
            }
            break;
        }
        case Op::Elementwise:
        case Op::Add:
            for (int a : n.args)
                for (int64_t f = 0; f < n.features; f++)
                    if (u[(size_t)f]) used[(size_t)a][(size_t)f] = true;
            break;
        }
    }
    for (size_t i = 0; i < nodes_.size(); i++) {
        std::vector<bool> unused((size_t)nodes_[i].features);
        for (size_t f = 0; f < unused.size(); f++)
            unused[f] = !used[i][f];
        if (unused != nodes_[i].unused) {
            nodes_[i].unused = std::move(unused);
            changed = true;
        }
    }
    return changed;
}

void SparsityGraph::propagate() {
    bool any_output = false;
    for (const Node &n : nodes_)
        any_output |= n.is_output;
    if (!any_output) throw_runtime_error("SparsityGraph::propagate: no output marked (output(t)): nothing is used");
    // Each round only drops blocks or adds zero / unused features, so this ends. Both passes run
    // every round (a change found forward may enable one backward, and the reverse).
    for (bool changed = true; changed;) {
        const bool forward_changed = forward();
        const bool backward_changed = backward();
        changed = forward_changed || backward_changed;
    }
    propagated_ = true;
    if (util::env_debug_level() >= 1) std::cerr << "-- cora: sparsity propagation --\n" << report();
}

const std::vector<bool> &SparsityGraph::zero_features(int t) const {
    const Node &n = node(t, "zero_features");
    if (!propagated_) throw_runtime_error("SparsityGraph::zero_features: call propagate() first");
    return n.zero;
}

const std::vector<bool> &SparsityGraph::unused_features(int t) const {
    const Node &n = node(t, "unused_features");
    if (!propagated_) throw_runtime_error("SparsityGraph::unused_features: call propagate() first");
    return n.unused;
}

BsrData SparsityGraph::pruned_weight(int layer) const {
    const Node &n = node(layer, "pruned_weight");
    if (n.op != Op::Linear) throw_runtime_error("SparsityGraph::pruned_weight: '", n.name, "' is not a linear layer");
    if (!propagated_) throw_runtime_error("SparsityGraph::pruned_weight: call propagate() first");
    const BsrData &w = n.weight;
    BsrData out;
    out.rows = w.rows, out.cols = w.cols, out.block_rows = w.block_rows, out.block_cols = w.block_cols;
    out.crow.assign(w.crow.size(), 0);
    const size_t block = (size_t)(w.block_rows * w.block_cols);
    for (int64_t rb = 0; rb < w.row_blocks(); rb++) {
        for (int32_t p = w.crow[(size_t)rb]; p < w.crow[(size_t)rb + 1]; p++) {
            if (!n.block_kept[(size_t)p]) continue;
            out.col.push_back(w.col[(size_t)p]);
            out.values.insert(out.values.end(), w.values.begin() + (ptrdiff_t)(p * block),
                              w.values.begin() + (ptrdiff_t)((p + 1) * block));
        }
        out.crow[(size_t)rb + 1] = (int32_t)out.col.size();
    }
    return out;
}

std::string SparsityGraph::report() const {
    std::ostringstream os;
    for (const Node &n : nodes_) {
        os << n.name << ": " << count(n.zero) << " of " << n.features << " features known zero, " << count(n.unused)
           << " unused";
        if (n.op == Op::Linear) os << "; weight blocks " << n.weight.nnzb() << " -> " << count(n.block_kept) << " kept";
        os << "\n";
    }
    return os.str();
}

} // namespace cora
