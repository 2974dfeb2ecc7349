/** \file Expressions, named dimensions, symbolic parameters and length arrays.
 *
 * An Expr is an immutable handle to an IR node. Integer literals are 64-bit index
 * arithmetic; floating literals (2.0, 2.0f) are fp32, as in Halide. A Dim converts to the
 * Expr of its index variable, so `A(b, s) * 2` reads naturally. */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cora/Type.h"

namespace cora {

namespace ir {
struct ExprNode;
struct DimNode;
struct UFNode;
} // namespace ir

class Expr {
public:
    Expr() = default;
    Expr(std::shared_ptr<const ir::ExprNode> n) : node_(std::move(n)) {}
    Expr(int v);
    Expr(int64_t v);
    Expr(float v);
    Expr(double v); ///< fp32 constant, like Halide

    bool defined() const { return node_ != nullptr; }
    Type type() const;
    const ir::ExprNode *get() const { return node_.get(); }
    const std::shared_ptr<const ir::ExprNode> &ptr() const { return node_; }
    template <typename T> const T *as() const;
    bool same_as(const Expr &o) const { return node_ == o.node_; }

private:
    std::shared_ptr<const ir::ExprNode> node_;
};

/** A named dimension: an identity shared by the loops and tensor dimensions it links. */
class Dim {
public:
    explicit Dim(const std::string &name);
    const std::string &name() const;
    /** The index variable of this dimension. */
    Expr var() const;
    operator Expr() const { return var(); }
    bool same_as(const Dim &o) const { return node_ == o.node_; }
    const std::shared_ptr<const ir::DimNode> &node() const { return node_; }
    explicit Dim(std::shared_ptr<const ir::DimNode> n) : node_(std::move(n)) {}

private:
    std::shared_ptr<const ir::DimNode> node_;
};

/** A symbolic integer supplied at run time (e.g. batch size), with an inclusive range. */
class Param {
public:
    Param(const std::string &name, int64_t min_value, int64_t max_value);
    const std::string &name() const;
    int64_t min_value() const;
    int64_t max_value() const;
    Expr expr() const { return var_; }
    operator Expr() const { return var_; }

private:
    Expr var_;
};

/** An input int32 array of lengths, one per index of a dimension of extent `count`, each in
 * the inclusive range [min_value, max_value]. `len(b)` is an uninterpreted-function call. */
class LengthArray {
public:
    LengthArray(const std::string &name, Expr count, int64_t min_value, int64_t max_value);
    /** A length array whose values are known when compiling (a static pattern, a fixed length
     * profile): its count is values.size(), reads at a constant index fold to the value, so a
     * dismantled loop (Func::dismantle) over it gets constant extents; kernels still take the
     * array at run time and check that it holds exactly these values. CompileError when a value
     * lies outside [min_value, max_value]. */
    static LengthArray constant(const std::string &name, const std::vector<int32_t> &values, int64_t min_value,
                                int64_t max_value);
    const std::string &name() const;
    Expr count() const;
    int64_t min_value() const;
    int64_t max_value() const;
    Expr operator()(const Expr &index) const;
    /** The values given to constant(), or null. */
    const std::vector<int64_t> *static_values() const;
    const std::shared_ptr<const ir::UFNode> &node() const { return node_; }

private:
    LengthArray() = default;
    std::shared_ptr<const ir::UFNode> node_;
};

/** An input int32 tensor that belongs to a batch's shape, as length arrays do: a mask
 * (`{N, H, W}`, values in [0, 1]), a list of active coordinates or tile origins, a block pattern.
 * It is bound to the RaggedShape (RaggedShape::set), its element count and every value's range are
 * checked at run time, and it is read by expressions, `mask(n, y, x)`, and by the formats (aux
 * kinds) that build arrays from it. Kernels take it as an int32 argument stored row-major
 * (ArgumentKind::LengthArray; the argument's layout names its dims). */
class ShapeTensor {
public:
    /** `dims`: integer expressions of params (one or more), each value in the inclusive range
     * [min_value, max_value]. CompileError for an empty name or dims list, an empty range or one
     * that does not fit int32, or a dim that is not an integer expression. */
    ShapeTensor(const std::string &name, std::vector<Expr> dims, int64_t min_value, int64_t max_value);
    const std::string &name() const;
    const std::vector<Expr> &dims() const;
    /** The element count: the product of the dims. */
    Expr count() const;
    int64_t min_value() const;
    int64_t max_value() const;
    /** The element at `index` (one integer index per dim): an uninterpreted-function call that
     * kernels turn into a read. CompileError for a wrong number of indices. */
    Expr operator()(const std::vector<Expr> &index) const;
    template <typename... I> Expr operator()(const Expr &i0, const I &...rest) const {
        return (*this)(std::vector<Expr>{i0, Expr(rest)...});
    }
    const std::shared_ptr<const ir::UFNode> &node() const { return node_; }

private:
    std::shared_ptr<const ir::UFNode> node_;
};

Expr operator+(const Expr &a, const Expr &b);
Expr operator-(const Expr &a, const Expr &b);
Expr operator*(const Expr &a, const Expr &b);
/** Integer division rounds toward negative infinity (floor), as in Halide and Python. */
Expr operator/(const Expr &a, const Expr &b);
/** Integer modulo pairs with floor division: a == (a / b) * b + a % b; the result has the sign
 * of the divisor (never negative for b > 0). */
Expr operator%(const Expr &a, const Expr &b);
Expr operator-(const Expr &a);
Expr operator==(const Expr &a, const Expr &b);
Expr operator!=(const Expr &a, const Expr &b);
Expr operator<(const Expr &a, const Expr &b);
Expr operator<=(const Expr &a, const Expr &b);
Expr operator>(const Expr &a, const Expr &b);
Expr operator>=(const Expr &a, const Expr &b);
Expr operator&&(const Expr &a, const Expr &b);
Expr operator||(const Expr &a, const Expr &b);
Expr operator!(const Expr &a);

Expr min(const Expr &a, const Expr &b);
Expr max(const Expr &a, const Expr &b);
/** cond ? t : f, evaluated lazily in generated code. */
Expr select(const Expr &cond, const Expr &t, const Expr &f);
Expr cast(Type t, const Expr &e);
Expr exp(const Expr &e);
Expr log(const Expr &e);
Expr sqrt(const Expr &e);
Expr tanh(const Expr &e);
Expr erf(const Expr &e);
Expr abs(const Expr &e);
/** The smallest multiple of m that is >= e (m > 0 constant). */
Expr ceil_mult(const Expr &e, int64_t m);
/** The largest multiple of m that is <= e (m > 0 constant). */
Expr floor_mult(const Expr &e, int64_t m);
/** Ceiling division by a positive constant. */
Expr ceil_div(const Expr &e, int64_t m);

enum class ReduceOp { Sum, Max, Min };
/** Reduce `body` over k in [0, extent); the extent may depend on outer dims (a vloop). */
Expr sum(const Dim &k, const Expr &extent, const Expr &body);
Expr maximum(const Dim &k, const Expr &extent, const Expr &body);
Expr minimum(const Dim &k, const Expr &extent, const Expr &body);

/** Print an expression in cora's IR syntax. */
std::string to_string(const Expr &e);

} // namespace cora
