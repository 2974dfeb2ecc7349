/** \file The tensor-core tile of a gpu_mma loop (MmaTile.h). */
#include "analysis/MmaTile.h"

#include <array>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** `e` with every let that (transitively) reads one of `roots` replaced by its value, so that
 * "does not read t" is a question about `e` alone. */
Expr inline_dependent_lets(Expr e, const std::map<const VarNode *, Expr> &lets,
                           const std::set<const VarNode *> &roots) {
    std::map<const VarNode *, bool> memo;
    std::function<bool(const VarNode *)> depends = [&](const VarNode *v) {
        if (roots.count(v)) return true;
        auto l = lets.find(v);
        if (l == lets.end()) return false;
        if (auto m = memo.find(v); m != memo.end()) return m->second;
        memo[v] = false; // a let cannot read itself; this only stops a malformed cycle
        bool d = false;
        for (const VarNode *u : vars_of(l->second, VarRole::Index))
            d = d || depends(u);
        for (const VarNode *u : vars_of(l->second, VarRole::Local))
            d = d || depends(u);
        return memo[v] = d;
    };
    for (size_t round = 0; round <= lets.size(); round++) {
        std::map<const VarNode *, Expr> replace;
        for (VarRole role : {VarRole::Index, VarRole::Local})
            for (const VarNode *v : vars_of(e, role))
                if (!roots.count(v) && lets.count(v) && depends(v)) replace[v] = lets.at(v);
        if (replace.empty()) break;
        e = substitute(e, replace);
    }
    return e;
}

/** The names among `vars` that `e` reads, for messages ("t, jl"). */
std::string reads(const Expr &e, const std::vector<VarPtr> &vars) {
    std::string s;
    for (const VarPtr &v : vars)
        if (uses_var(e, v.get())) s += (s.empty() ? "" : ", ") + v->name;
    return s.empty() ? "none of them" : s;
}

} // namespace

MmaTile match_mma_tile(const For *k_loop, const For *thread_x, const For *thread_y,
                       const std::map<const VarNode *, Expr> &outer_lets) {
    const std::string where = "gpu_mma loop '" + k_loop->var->name + "': ";
    const int64_t *k_extent = as_const_int(k_loop->extent);
    if (!k_extent || *k_extent != 16) throw_compile_error(where, "its extent is ", print(k_loop->extent), ", not 16");
    MmaTile tile;
    tile.k_loop = k_loop;
    tile.t = thread_x->var;
    tile.g = thread_y->var;
    // The register nest: two loops of extent 2 from 0, lets allowed in between, one store.
    std::map<const VarNode *, Expr> inner_lets; // all inlined: CUDA prints the nest as one instruction
    std::vector<const For *> regs;
    Stmt s = k_loop->body;
    for (;;) {
        if (const LetStmt *l = s.as<LetStmt>()) {
            inner_lets[l->var.get()] = l->value;
            s = l->body;
        } else if (const IfThenElse *c = s.as<IfThenElse>()) {
            throw_compile_error(where, "the nest has a bound check, ", print(c->cond),
                                "; every lane of a warp must reach the instruction: make the sizes the tiles cover "
                                "whole tiles (e.g. an extent written as a Param times 16)");
        } else if (const For *f = s.as<For>(); f && regs.size() < 2) {
            const int64_t *mn = as_const_int(f->min), *ext = as_const_int(f->extent);
            if (!mn || *mn != 0 || !ext || *ext != 2)
                throw_compile_error(where, "loop '", f->var->name, "' inside it runs over [", print(f->min), ", ",
                                    print(f->min), " + ", print(f->extent),
                                    "); the nest inside a gpu_mma loop is the thread's 2 x 2 outputs, two loops of "
                                    "extent 2 (split i into ih(2), g(8) and j into t(4), jl(2))");
            regs.push_back(f);
            s = f->body;
        } else {
            break;
        }
    }
    const Store *update = s.as<Store>();
    if (regs.size() != 2 || !update)
        throw_compile_error(where,
                            "its body must be a 2 x 2 register nest around one update acc = acc + a * b (the "
                            "reduction inside a cache_write tile, with nothing else and no bound check); "
                            "found:\n",
                            print(Stmt(k_loop->body)));
    const std::set<const VarNode *> roots = {tile.t.get(), tile.g.get(), k_loop->var.get(), regs[0]->var.get(),
                                             regs[1]->var.get()};
    auto resolve = [&](Expr e) {
        for (size_t round = 0; round <= inner_lets.size(); round++)
            e = substitute(e, inner_lets);
        return inline_dependent_lets(e, outer_lets, roots);
    };
    // acc = acc + x * y, either way round.
    const Add *sum = update->value.as<Add>();
    const Expr acc_index = resolve(update->index);
    const Mul *product = nullptr;
    if (sum)
        for (const Expr &side : {sum->a, sum->b}) {
            const Load *acc = (side.get() == sum->a.get() ? sum->b : sum->a).as<Load>();
            if (side.as<Mul>() && acc && acc->buffer.get() == update->buffer.get() &&
                equal(resolve(acc->index), acc_index))
                product = side.as<Mul>();
        }
    const Load *x = product ? product->a.as<Load>() : nullptr, *y = product ? product->b.as<Load>() : nullptr;
    if (!x || !y)
        throw_compile_error(where, "the update must be acc = acc + a * b with a and b read from memory; found ",
                            update->buffer->name, "[", print(update->index), "] = ", print(update->value));
    if (update->buffer->type != Float32)
        throw_compile_error(where, "the sum '", update->buffer->name, "' is ", update->buffer->type.str(),
                            "; tensor cores accumulate in float32 (define the Func as float32 or give it a "
                            "cache_write tile)");
    for (const Load *operand : {x, y})
        if (operand->buffer->type != Float16)
            throw_compile_error(where, "the operand '", operand->buffer->name, "' is ", operand->buffer->type.str(),
                                "; mma.sync.m16n8k16 multiplies float16 (declare the tensor Float16)");
    // Which operand is A (the thread's rows: reads neither t nor the column loop) and which is
    // B (its columns: reads neither g nor the row loop).
    const Expr xi = resolve(x->index), yi = resolve(y->index);
    bool found = false;
    for (int swap = 0; swap < 2 && !found; swap++)
        for (int order = 0; order < 2 && !found; order++) {
            const Expr &ai = swap ? yi : xi, &bi = swap ? xi : yi;
            const VarPtr &ih = regs[order]->var, &jl = regs[1 - order]->var;
            if (uses_var(ai, tile.t.get()) || uses_var(ai, jl.get()) || uses_var(bi, tile.g.get()) ||
                uses_var(bi, ih.get()))
                continue;
            found = true;
            tile.a = (swap ? y : x)->buffer;
            tile.b = (swap ? x : y)->buffer;
            tile.a_index = ai;
            tile.b_index = bi;
            tile.ih = ih;
            tile.jl = jl;
        }
    if (!found) {
        const std::vector<VarPtr> v = {tile.t, tile.g, regs[0]->var, regs[1]->var};
        throw_compile_error(where,
                            "the operands do not follow the fragment layout: one must be read at the "
                            "thread's rows (reading neither threadIdx.x '",
                            tile.t->name,
                            "' nor the column loop), the other at its columns (reading neither threadIdx.y '",
                            tile.g->name, "' nor the row loop); '", x->buffer->name, "' reads ", reads(xi, v), " and '",
                            y->buffer->name, "' reads ", reads(yi, v),
                            ". Bind gpu_threads(t, g) with t the tile's 4 column pairs and g its 8 rows");
    }
    if (uses_var(acc_index, k_loop->var.get()))
        throw_compile_error(where, "the sum '", update->buffer->name, "' is indexed by the reduction loop itself");
    tile.acc = update->buffer;
    tile.acc_index = acc_index;
    const MmaFragments f = mma_fragments(tile);
    for (int p = 0; p < 4; p++)
        for (int q = p + 1; q < 4; q++) {
            const Expr difference = simplify(Sub::make(f.c[q], f.c[p])); // as_const_int points into it
            const int64_t *d = as_const_int(difference);
            if (!d || *d == 0)
                throw_compile_error(where, "the thread's four sums must be four different elements of '",
                                    update->buffer->name, "' (its register tile); found ", print(f.c[p]), " and ",
                                    print(f.c[q]));
        }
    return tile;
}

MmaFragments mma_fragments(const MmaTile &tile) {
    const Expr t = var_expr(tile.t), g = var_expr(tile.g);
    const Expr two = IntImm::make(2);
    MmaFragments f;
    for (int q = 0; q < 2; q++)
        for (int h = 0; h < 2; h++) {
            // The k this lane supplies: m + 2t + h (q = 0) or m + 2t + 8 + h (q = 1).
            const Expr k = Add::make(tile.k_loop->min, Add::make(Mul::make(two, t), IntImm::make(8 * q + h)));
            for (int ih = 0; ih < 2; ih++)
                f.a[ih + 2 * q][h] = simplify(
                    substitute(tile.a_index, {{tile.k_loop->var.get(), k}, {tile.ih.get(), IntImm::make(ih)}}));
            // Column g of B, which thread (t, jl) = (g / 2, g % 2) reads in the nest.
            f.b[q][h] = simplify(substitute(
                tile.b_index,
                {{tile.k_loop->var.get(), k}, {tile.t.get(), Div::make(g, two)}, {tile.jl.get(), Mod::make(g, two)}}));
        }
    for (int r = 0; r < 4; r++)
        f.c[r] = simplify(
            substitute(tile.acc_index, {{tile.ih.get(), IntImm::make(r / 2)}, {tile.jl.get(), IntImm::make(r % 2)}}));
    return f;
}

namespace {

bool is_zero(const Expr &e) { return is_const(simplify(e), 0); }
/** A tree of selects over the lanes' matrices (and, for .trans, rows) whose leaves differ by
 * constants (the usual case: the same row of another 8 x 8 block of the tile) as one leaf plus a
 * select of the constants, which the CUDA compiler keeps as one address and a small table. The
 * tree as it is (simplified) when the leaves differ otherwise. */
Expr by_matrix_offset(const Expr &tree) {
    Expr base = tree;
    while (const Select *sel = base.as<Select>())
        base = sel->f;
    std::function<Expr(const Expr &)> offsets = [&](const Expr &e) -> Expr {
        if (const Select *sel = e.as<Select>()) {
            const Expr a = offsets(sel->t), b = offsets(sel->f);
            return a.defined() && b.defined() ? Select::make(sel->cond, a, b) : Expr();
        }
        const Expr d = simplify(Sub::make(e, base));
        return as_const_int(d) ? d : Expr();
    };
    const Expr o = offsets(tree);
    return o.defined() ? simplify(Add::make(base, o)) : simplify(tree);
}

/** The matrix (of `matrices`) and the row whose address lane l = t + 4g passes to ldmatrix:
 * (l / 8) % matrices and l % 8. */
std::pair<Expr, Expr> lane_matrix_row(const Expr &t, const Expr &g, size_t matrices) {
    const Expr lane = Add::make(t, Mul::make(g, IntImm::make(4)));
    return {Mod::make(Div::make(lane, IntImm::make(8)), IntImm::make((int64_t)matrices)),
            Mod::make(lane, IntImm::make(8))};
}

} // namespace

/** ldmatrix (m8n8, 16-bit elements) loads fragment registers from 8 x 8 matrices in shared
 * memory, each row 8 contiguous halves (16 bytes, aligned): lane l gives the address of row
 * l % 8 of matrix l / 8, and register j of lane l receives row l / 4, halves 2 (l % 4) and
 * + 1 of matrix j (PTX ISA, "ldmatrix"). That is a fragment register's layout — lane
 * (t, g) = (l % 4, l / 4) holds two adjacent halves of row g at 2t — when, with `regs[j][h]`
 * the element index of half h of register j as a function of the lane's t and g:
 *  - the halves are adjacent: regs[j][1] = regs[j][0] + 1;
 *  - the lanes of a row step by 2: regs[j][0] = regs[j][0](t = 0) + 2t;
 *  - every row starts 16 bytes into the tile's alignment: regs[j][0](t = 0) % 8 = 0 (the
 *    simplifier drops the terms whose coefficients are multiples of 8).
 * Then the index lane (t, g) passes is row_j(i) = regs[j][0](t = 0, g = i) at j = l / 8,
 * i = l % 8 for l = t + 4g (a block of 4 x 8 threads per warp: MmaTile.h); with two registers
 * (.x2) lanes 16-31 pass an address ldmatrix ignores (matrix j % 2). Undefined: the layout
 * does not allow it, and the fragments are packed from single halves instead. */
Expr ldmatrix_rows(const std::vector<std::array<Expr, 2>> &regs, const Expr &t, const Expr &g) {
    const VarNode *tv = t.as<Var>(), *gv = g.as<Var>();
    const Expr zero = IntImm::make(0);
    const auto [matrix, row] = lane_matrix_row(t, g, regs.size());
    Expr index;
    for (size_t j = regs.size(); j-- > 0;) {
        const Expr start = substitute(regs[j][0], tv, zero);
        if (!is_zero(Sub::make(Sub::make(regs[j][1], regs[j][0]), IntImm::make(1))) ||
            !is_zero(Sub::make(Sub::make(regs[j][0], start), Mul::make(t, IntImm::make(2)))) ||
            !is_zero(Mod::make(start, IntImm::make(8))))
            return Expr();
        const Expr at = substitute(start, gv, row);
        index = index.defined() ? Select::make(EQ::make(matrix, IntImm::make((int64_t)j)), at, index) : at;
    }
    return by_matrix_offset(index);
}
/** ldmatrix .trans: register j of lane l receives column l / 4 of matrix j, rows 2 (l % 4) and
 * + 1 — two B halves at k = 2t, 2t + 1 (+ 8 j) of column g, stored with column g contiguous
 * across the lanes: regs[j][h] = regs[j][h](g = 0) + g, each row (a k) starting aligned. Lane l
 * passes row i = l % 8 of matrix j = l / 8 % 2: k = 8j + i, that is t = i / 2, h = i % 2. */
Expr ldmatrix_trans_rows(const std::vector<std::array<Expr, 2>> &regs, const Expr &t, const Expr &g) {
    const VarNode *tv = t.as<Var>(), *gv = g.as<Var>();
    const Expr zero = IntImm::make(0);
    const auto [matrix, row] = lane_matrix_row(t, g, regs.size());
    Expr index;
    for (size_t j = regs.size(); j-- > 0;) {
        Expr at[2];
        for (int h = 0; h < 2; h++) {
            const Expr start = substitute(regs[j][h], gv, zero);
            if (!is_zero(Sub::make(Sub::make(regs[j][h], start), g)) || !is_zero(Mod::make(start, IntImm::make(8))))
                return Expr();
            at[h] = substitute(start, tv, Div::make(row, IntImm::make(2)));
        }
        const Expr both = Select::make(EQ::make(Mod::make(row, IntImm::make(2)), zero), at[0], at[1]);
        index = index.defined() ? Select::make(EQ::make(matrix, IntImm::make((int64_t)j)), both, index) : both;
    }
    return by_matrix_offset(index);
}

} // namespace cora::ir
