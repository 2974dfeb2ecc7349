/** \file A direct evaluator of IR. It is the reference semantics for tests (definitions
 * evaluated element by element, in double precision) and the engine of the host-side prelude:
 * extents evaluated per outer row, and each aux array built by running its kind's IR builder
 * (AuxKind::build, the very statements AOT kernels compile) over integer buffers. */
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "analysis/VarValues.h"
#include "ir/Tensor.h"

namespace cora::ir {

class Interpreter {
public:
    /** Value of a length array element (by UF and index). */
    std::function<int64_t(const UFNode *, int64_t)> length_value;
    /** Value of an aux array element (by UF and its multi-dimensional index). */
    std::function<int64_t(const UFNode *, const std::vector<int64_t> &)> aux_value;
    /** Value of a tensor element (Access nodes): the tensor and its `n` indices. (A pointer and a
     * count, not a vector: the reference evaluator reads tensors in its innermost loops, and a
     * vector per read was most of its time.) */
    std::function<double(const TensorNode *, const int64_t *idx, size_t n)> tensor_value;
    /** Values of params and bound loop variables. */
    VarValues ints;
    /** Integer memory that Load and Store address, by buffer variable (not owned). Allocate adds
     * its buffer for the extent of its body. */
    std::map<const VarNode *, std::vector<int64_t> *> int_buffers;

    int64_t eval_int(const Expr &e);
    double eval_float(const Expr &e);
    bool eval_bool(const Expr &e);
    /** Evaluates any expression; integers and booleans are returned as doubles. */
    double eval(const Expr &e);

    /** Runs a statement over integer scalars and `int_buffers` (loops of every kind run in
     * order). Integer arithmetic is overflow-checked (RuntimeError), a failed Assert throws
     * RuntimeError with its message, and a Load or Store outside its buffer is an InternalError:
     * the statements run here index memory only at checked positions. */
    void exec(const Stmt &s);

    /** Calls f(index) for every index of the layout, in lexicographic order (the packed order
     * of an unpadded layout). Extents are evaluated with the current bindings. */
    void for_each_index(const Layout &layout, const std::function<void(const std::vector<int64_t> &)> &f);

private:
    /** Runs `body` with the integer `var` bound to `value` (LetStmt, LocalVar). */
    void exec_scoped(const Stmt &s, const VarPtr &var, const Expr &value, const Stmt &body);
};

} // namespace cora::ir
