/** \file Sparsity propagation (TeSA, SparTA OSDI'22) over a graph of token-major layers with
 * block-sparse weights: which features (columns) of each tensor are known zero, propagated forward,
 * and which are never used, propagated backward; then each weight keeps only the blocks that can
 * change an output. A block of W2 whose input features FF1 always leaves zero does no useful work,
 * and neither does a block of W1 whose outputs FF2 never reads: pruned_weight() drops both, and the
 * outputs the graph marks stay bit-for-bit what they were (the dropped products are exact zeros
 * or never read).
 *
 *     SparsityGraph g;
 *     int x = g.input("X", 768);
 *     int h = g.linear("FF1", x, w1, false, Activation::ReLU);  // bias-free: zero rows stay zero
 *     int y = g.linear("FF2", h, w2, true, Activation::None);
 *     g.output(y);
 *     g.propagate();                  // CORA_DEBUG=1 prints what it derived
 *     BsrData w2p = g.pruned_weight(y); // use instead of w2
 *
 * Rules (block granularity: a block counts as present whatever values it holds):
 *  - linear y = act(x W^T + b), W [out, in]: output feature n is zero when the layer has no bias,
 *    act(0) = 0 (None, ReLU, GELU; not Sigmoid or Exp) and every present block of n's block row
 *    reads only zero features of x. Backward, input feature k is used when a present block of its
 *    block column lies in a block row with a used output feature.
 *  - elementwise y = f(x): zero where x is when f(0) = 0; every feature of x used that y uses.
 *  - add y = a + b: zero where both are; a and b used where y is.
 *  - a tensor read by several layers is used where any of them uses it; outputs are used whole.
 * Both directions run to a fixed point (a block dropped backward can zero a feature forward).
 * The patterns are the weights' run-time BSR data: propagate once per set of weights, before
 * binding them (static patterns known when compiling go through the same call). */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cora/Sparse.h"

namespace cora {

/** The activation after a linear layer; what matters here is whether act(0) = 0. */
enum class Activation { None, ReLU, GELU, Sigmoid, Exp };

class SparsityGraph {
public:
    /** A tensor of `features` columns (rows are tokens); `known_zero` (empty: none) marks features
     * that are zero in every row. Returns the tensor's id. RuntimeError on a bad size. */
    int input(const std::string &name, int64_t features, std::vector<bool> known_zero = {});
    /** y = act(x W^T + bias), W [out, in] in BSR with in = features of x. Returns y's id, which
     * also names the layer for pruned_weight(). RuntimeError when the sizes disagree or w is invalid. */
    int linear(const std::string &name, int x, const BsrData &w, bool has_bias, Activation act);
    /** y = f(x) elementwise; `zero_preserving`: f(0) = 0 (ReLU, a scale, a mask). */
    int elementwise(const std::string &name, int x, bool zero_preserving);
    /** y = a + b (a residual); a and b have the same features. */
    int add(const std::string &name, int a, int b);
    /** Mark tensor `t` an output: every feature of it is used. */
    void output(int t);

    /** Run both directions to a fixed point. RuntimeError when no output was marked. */
    void propagate();

    /** After propagate(): features of `t` zero in every row, and features no output depends on. */
    const std::vector<bool> &zero_features(int t) const;
    const std::vector<bool> &unused_features(int t) const;
    /** After propagate(): layer `layer`'s weight without the blocks that read only known-zero
     * features or write only unused ones (RuntimeError when `layer` is not a linear layer). */
    BsrData pruned_weight(int layer) const;
    /** What propagate() derived, one line per tensor and per weight. */
    std::string report() const;

private:
    enum class Op { Input, Linear, Elementwise, Add };
    struct Node {
        std::string name;
        Op op;
        int64_t features;
        std::vector<int> args;
        BsrData weight;
        bool has_bias = false, zero_preserving = false, is_output = false;
        std::vector<bool> zero, unused;
        std::vector<bool> block_kept; ///< Linear: per present block of `weight`, after propagate()
    };
    const Node &node(int t, const char *what) const;
    int add_node(Node n);
    bool forward();
    bool backward();
    std::vector<Node> nodes_;
    bool propagated_ = false;
};

} // namespace cora
