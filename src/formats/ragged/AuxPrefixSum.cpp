/** \file Aux kind: prefix sums. Over layout [o.., x: S + 1], entry (o.., x) is the sum of the
 * kind's `summand` (in the layout's variables) over x' < x: entry 0 is 0 and entry x + 1 = entry
 * x + summand(x), per outer index; the last dim's extent is the summed range + 1. They turn a
 * ragged index into a packed offset. */
#include "formats/ragged/RaggedKinds.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The loads/stores of one row of the array: index (o.., last) through the array's own layout. */
struct PrefixRows {
    const Layout &layout;
    FlatLayout flat;
    std::vector<Expr> idx;
    PrefixRows(const AuxSpec &spec, AuxTable &table) : layout(spec.layout), flat(flatten_layout(table, spec.layout)) {
        for (const LayoutDim &ld : layout)
            idx.push_back(var_expr(ld.dim->var));
    }
    Expr x() const { return idx.back(); }
    Expr offset(const Expr &last) const {
        std::vector<Expr> i = idx;
        i.back() = last;
        return flat_offset(flat, layout, i);
    }
    /** `row_body` (over x in [0, S)) after `first`, inside the loops over the outer dims. */
    Stmt nest(const Stmt &first, const Stmt &row_body) const {
        Stmt s = Block::make(
            {first, For::make(layout.back().dim->var, IntImm::make(0), Sub::make(layout.back().extent, IntImm::make(1)),
                              ForKind::Serial, row_body)});
        for (int k = (int)layout.size() - 2; k >= 0; k--)
            s = For::make(layout[k].dim->var, IntImm::make(0), layout[k].extent, ForKind::Serial, s);
        return s;
    }
};

class PrefixSumKind : public AuxKind {
public:
    explicit PrefixSumKind(Expr summand) : summand_(std::move(summand)) {}
    const char *name() const override { return "prefix sum"; }
    const Expr *prefix_summand() const override { return &summand_; }
    AuxInputs inputs() const override { return AuxInputs{{summand_}, {}, {}}; }

    Stmt build(const AuxArray &a, AuxTable &table) const override {
        PrefixRows rows(a.spec(), table);
        Expr x = rows.x();
        Expr next = Add::make(Load::make(a.buffer, rows.offset(x)), summand_);
        // Evaluated overflow-checked (as every Assert): a total that does not fit in 64 bits stops
        // the kernel with a message instead of wrapping into offsets that would pass as valid.
        Stmt no_overflow =
            Assert::make(GE::make(next, IntImm::make(0)), {"aux array '" + a.name + "': entry ", " would be ", ""},
                         {Add::make(x, IntImm::make(1)), next});
        Stmt step = Block::make({no_overflow, Store::make(a.buffer, rows.offset(Add::make(x, IntImm::make(1))), next)});
        return rows.nest(Store::make(a.buffer, rows.offset(IntImm::make(0)), IntImm::make(0)), step);
    }

    /** First entry 0, consecutive differences equal to the summand (the slice sizes). */
    Stmt check(const AuxArray &a, AuxTable &table) const override {
        PrefixRows rows(a.spec(), table);
        const Expr &summand = summand_;
        Expr x = rows.x();
        auto at = [&](const Expr &last) { return Load::make(a.buffer, rows.offset(last)); };
        Expr diff = Sub::make(at(Add::make(x, IntImm::make(1))), at(x));
        Stmt step = Assert::make(EQ::make(diff, summand),
                                 {"aux array '" + a.name + "' is inconsistent with the lengths: entry ", " - entry ",
                                  " = ", ", expected ", " (" + print(summand) + ")"},
                                 {Add::make(x, IntImm::make(1)), x, diff, summand});
        Stmt first = Assert::make(EQ::make(at(IntImm::make(0)), IntImm::make(0)),
                                  {"aux array '" + a.name + "' must start at 0, got ", ""}, {at(IntImm::make(0))});
        return rows.nest(first, step);
    }

private:
    Expr summand_;
};

} // namespace

std::shared_ptr<const AuxKind> prefix_sum_kind(Expr summand) {
    return std::make_shared<const PrefixSumKind>(std::move(summand));
}

} // namespace cora::ir
