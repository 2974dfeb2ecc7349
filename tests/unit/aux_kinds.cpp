// Each aux kind's one builder (AuxKind::build), run by the host prelude's interpreter, against
// definitions written here independently: prefix sums, fusion maps with their pad segment, and
// longest-first orders (a stable sort by descending cost). AOT kernels compile the same builder;
// tests/aot checks them against the reference.
#include "common/ragged_testing.h"

#include "analysis/AuxKind.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

using namespace cora;
using namespace cora::ir;

namespace {

std::vector<int64_t> prefix_sums(const std::vector<int32_t> &l) {
    std::vector<int64_t> p(l.size() + 1, 0);
    for (size_t i = 0; i < l.size(); i++)
        p[i + 1] = p[i] + l[i];
    return p;
}

/** Lengths with many ties and a large count, for the order's merge passes (2^k and one past). */
std::vector<std::vector<int32_t>> order_cases() {
    std::vector<std::vector<int32_t>> cases = testing::length_cases(40, 8, 11, 4);
    std::mt19937 rng(5);
    for (size_t n : {2u, 3u, 16u, 17u, 1000u, 4097u}) {
        std::uniform_int_distribution<int32_t> few(0, 3), many(0, 40);
        std::vector<int32_t> ties(n), spread(n), descending(n), ascending(n);
        for (size_t i = 0; i < n; i++) {
            ties[i] = few(rng);
            spread[i] = many(rng);
            descending[i] = (int32_t)(40 - (i * 40) / n);
            ascending[i] = (int32_t)((i * 40) / n);
        }
        for (auto *c : {&ties, &spread, &descending, &ascending})
            cases.push_back(*c);
    }
    return cases;
}

/** A batch of B ragged rows of len(b) tokens, its packed storage flattened in `table`. */
struct TokenBatch {
    AuxTable table;
    Dim batch{"batch"}, tok{"tok"}, fused{"fused"};
    Param B{"B", 1, 5000};
    LengthArray len{"len", B, 0, 40};
    Tensor X{"X", {{batch, B}, {tok, len(batch)}}};
    FlatLayout flat = flatten_layout(table, X.node()->storage);
};

} // namespace

TEST_CASE("prefix sums built by the prelude equal the running sums of the lengths", "[aux]") {
    AuxTable table;
    Dim batch("batch"), tok("tok");
    Param B("B", 1, 5000);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{batch, B}, {tok, len(batch)}});
    FlatLayout flat = flatten_layout(table, X.node()->storage);
    REQUIRE(flat.aux.size() == 1);
    for (const auto &lengths : order_cases()) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        REQUIRE(shape_impl(shape)->aux_array(flat.aux[0].get()) == prefix_sums(lengths));
    }
}

TEST_CASE("nested prefix sums (a 2-D ragged array of offsets) follow the layout's packed order", "[aux]") {
    AuxTable table;
    Dim doc("doc"), sent("sent"), word("word");
    Param D("D", 1, 8);
    LengthArray nsent("nsent", D, 0, 6), width("width", D, 1, 4);
    Tensor W("W", {{doc, D}, {sent, nsent(doc)}, {word, sent * width(doc) + 1}});
    FlatLayout flat = flatten_layout(table, W.node()->storage);
    for (const auto &counts : testing::length_cases(6, 2, 3)) {
        std::vector<int32_t> widths(counts.size());
        for (size_t d = 0; d < counts.size(); d++)
            widths[d] = (int32_t)(1 + d % 4);
        INFO(testing::describe(counts));
        RaggedShape shape;
        shape.set(D, (int64_t)counts.size()).set(nsent, counts).set(width, widths);
        // The words of sentence s of document d, in packed order; the offsets of word (d, s, 0).
        std::vector<int64_t> offsets;
        int64_t total = 0;
        for (size_t d = 0; d < counts.size(); d++)
            for (int32_t s = 0; s < counts[d]; s++) {
                offsets.push_back(total);
                total += (int64_t)s * widths[d] + 1;
            }
        REQUIRE(shape.size_of(W) == total);
        Interpreter in = shape_impl(shape)->interpreter();
        size_t k = 0;
        for (size_t d = 0; d < counts.size(); d++)
            for (int32_t s = 0; s < counts[d]; s++) {
                in.ints[doc.node()->var.get()] = (int64_t)d;
                in.ints[sent.node()->var.get()] = s;
                in.ints[word.node()->var.get()] = 0;
                REQUIRE(in.eval_int(flat.offset) == offsets[k++]);
            }
    }
}

TEST_CASE("fusion maps built by the prelude invert the prefix sum, pad segment included", "[aux]") {
    for (int64_t pad : {1, 4, 16}) {
        TokenBatch t;
        auto &[table, batch, tok, fused, B, len, X, flat] = t;
        FusionMaps maps = fusion_maps(table, fused.node(), flat.aux[0], B, pad);
        for (const auto &lengths : order_cases()) {
            INFO(testing::describe(lengths) << ", padded to a multiple of " << pad);
            RaggedShape shape;
            shape.set(B, (int64_t)lengths.size()).set(len, lengths);
            std::vector<int64_t> fo, fi, p = prefix_sums(lengths);
            for (size_t b = 0; b < lengths.size(); b++)
                for (int32_t t = 0; t < lengths[b]; t++) {
                    fo.push_back((int64_t)b);
                    fi.push_back(t);
                }
            int64_t last = (int64_t)lengths.size() - 1;
            while (fo.size() % pad) { // the pad segment belongs to the last item
                fi.push_back((int64_t)fo.size() - p[(size_t)last]);
                fo.push_back(last);
            }
            REQUIRE(shape_impl(shape)->aux_array(maps.outer.get()) == fo);
            REQUIRE(shape_impl(shape)->aux_array(maps.inner.get()) == fi);
            REQUIRE(shape.eval(maps.padded_total) == (int64_t)fo.size());
        }
    }
}

TEST_CASE("longest-first orders built by the prelude are stable sorts by descending cost", "[aux]") {
    AuxTable table;
    Dim batch("batch");
    Param B("B", 1, 5000);
    LengthArray len("len", B, 0, 40);
    // A cost that is not a bare length, so the builder evaluates the summand per row.
    auto order = longest_first_aux(table, batch.node(), B, len(batch) * len(batch) + 1);
    for (const auto &lengths : order_cases()) {
        INFO(testing::describe(lengths).substr(0, 200));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        std::vector<int64_t> want(lengths.size());
        for (size_t i = 0; i < want.size(); i++)
            want[i] = (int64_t)i;
        std::stable_sort(want.begin(), want.end(),
                         [&](int64_t a, int64_t b) { return lengths[(size_t)a] > lengths[(size_t)b]; });
        REQUIRE(shape_impl(shape)->aux_array(order.get()) == want);
    }
}

TEST_CASE("a prelude that overflows names the aux array it was building", "[aux][overflow]") {
    // Item b holds len(b)^2 elements: three items of 2^31 - 1 exceed 2^63.
    AuxTable table;
    Dim b("b"), i("i"), j("j");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, INT32_MAX);
    Tensor A("A", {{b, B}, {i, len(b)}, {j, len(b)}});
    FlatLayout flat = flatten_layout(table, A.node()->storage);
    REQUIRE(flat.aux.size() == 1);
    RaggedShape shape;
    shape.set(B, 3).set(len, {INT32_MAX, INT32_MAX, INT32_MAX});
    REQUIRE_THROWS_AS(shape_impl(shape)->aux_array(flat.aux[0].get()), RuntimeError);
    REQUIRE_THROWS_WITH(shape_impl(shape)->aux_array(flat.aux[0].get()),
                        Catch::Matchers::Contains("overflow") &&
                            Catch::Matchers::Contains("(while building aux array '" + flat.aux[0]->name + "'"));
    // Nothing was cached: the same shape with smaller lengths builds afterwards.
    REQUIRE(shape.aux_array_count() == 0);
    shape.set(len, {3, 0, 2});
    REQUIRE(shape_impl(shape)->aux_array(flat.aux[0].get()) == std::vector<int64_t>{0, 9, 9, 13});
}

TEST_CASE("aux kinds are objects that answer for themselves: summand, fused-loop role, inputs", "[aux]") {
    TokenBatch t;
    auto &[table, batch, tok, fused, B, len, X, flat] = t;
    const std::shared_ptr<const UFNode> &prefix = flat.aux[0];
    const AuxKind *kind = aux_kind_of(*prefix);
    REQUIRE(kind != nullptr);
    REQUIRE(std::string(kind->name()) == "prefix sum");
    REQUIRE(kind->is_prefix_sum());
    REQUIRE(!kind->maps_fused_loop());
    REQUIRE(print(*kind->prefix_summand()) == "len(batch)");
    REQUIRE(kind->inputs().arrays.empty());
    REQUIRE(kind->inputs().exprs.size() == 1);

    FusionMaps maps = fusion_maps(table, fused.node(), prefix, B, 4);
    std::optional<FusedLoopMap> fo = aux_kind_of(*maps.outer)->fused_loop_map(),
                                fi = aux_kind_of(*maps.inner)->fused_loop_map();
    REQUIRE((fo && fo->outer && fo->prefix == prefix.get() && fo->partner == nullptr));
    REQUIRE((fi && !fi->outer && fi->prefix == prefix.get() && fi->partner == maps.outer.get()));
    REQUIRE(aux_kind_of(*maps.outer)->prefix_summand() == nullptr);
    // fi is built from P and checked against fo: both come first in any closure that needs fi.
    AuxInputs fi_inputs = aux_kind_of(*maps.inner)->inputs();
    REQUIRE(fi_inputs.arrays.size() == 2);
    std::vector<std::shared_ptr<const UFNode>> closure =
        aux_closure(table, {UFCall::make(maps.inner, {IntImm::make(0)})});
    REQUIRE(closure.size() == 3);
    REQUIRE(closure.back() == maps.inner);

    auto order = longest_first_aux(table, batch.node(), B, len(batch) + 1);
    REQUIRE(std::string(aux_kind_of(*order)->name()) == "longest-first order");
    REQUIRE(!aux_kind_of(*order)->is_prefix_sum());
    REQUIRE(aux_kind_of(*order)->inputs().exprs.size() == 2);
    // Equal structure, one symbol and one kind object: the key decides, not the object.
    REQUIRE(longest_first_aux(table, batch.node(), B, len(batch) + 1) == order);
    REQUIRE(aux_kind_of(*len.node()) == nullptr); // a length array is no aux array
}

namespace {

/** A kind that exists only here: suffix sums S[x] = sum over x <= x' < E of `summand`, over
 * [d: E + 1] (S[E] = 0). Added as a format would be: a subclass and a constructor of its arrays,
 * no change in src/. */
class SuffixSumKind : public AuxKind {
public:
    SuffixSumKind(VarPtr d, Expr extent, Expr summand) : d_(std::move(d)), extent_(extent), summand_(summand) {}
    const char *name() const override { return "suffix sum (test)"; }
    Stmt build(const AuxArray &a, AuxTable &) const override {
        VarPtr t = make_var("t", VarRole::Index);
        Expr x = Sub::make(Sub::make(extent_, IntImm::make(1)), var_expr(t));
        Expr next = Add::make(Load::make(a.buffer, Add::make(x, IntImm::make(1))), substitute(summand_, d_.get(), x));
        return Block::make({Store::make(a.buffer, extent_, IntImm::make(0)),
                            For::make(t, IntImm::make(0), extent_, ForKind::Serial, Store::make(a.buffer, x, next))});
    }
    Stmt check(const AuxArray &, AuxTable &) const override { return Stmt(); }
    AuxInputs inputs() const override { return AuxInputs{{extent_, summand_}, {}, {}}; }

private:
    VarPtr d_;
    Expr extent_, summand_;
};

std::shared_ptr<const UFNode> suffix_sum_aux(AuxTable &table, const Dim &d, const Expr &extent, const Expr &summand) {
    const std::string key = "suffix " + structural_key(extent) + " ; " + structural_key(summand);
    return table.intern(key, [&] {
        auto spec = std::make_shared<AuxSpec>();
        spec->kind = std::make_shared<const SuffixSumKind>(d.node()->var, extent, summand);
        spec->layout = {LayoutDim{d.node(), Add::make(extent, IntImm::make(1))}};
        spec->key = key;
        auto u = std::make_shared<UFNode>();
        u->name = "suffix_" + d.name();
        u->arity = 1;
        u->min_value = 0;
        u->max_value = INT64_MAX;
        u->aux = spec;
        return u;
    });
}

} // namespace

TEST_CASE("an aux kind defined outside the library is built by the prelude like the library's own", "[aux]") {
    AuxTable table;
    Dim batch("batch");
    Param B("B", 1, 5000);
    LengthArray len("len", B, 0, 40);
    auto suffix = suffix_sum_aux(table, batch, B, len(batch));
    REQUIRE(suffix_sum_aux(table, batch, B, len(batch)) == suffix); // interned by its key
    for (const auto &lengths : order_cases()) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        std::vector<int64_t> want(lengths.size() + 1, 0);
        for (size_t i = lengths.size(); i-- > 0;)
            want[i] = want[i + 1] + lengths[i];
        REQUIRE(shape_impl(shape)->aux_array(suffix.get()) == want);
        // The shape's other arrays are untouched by it, and a call evaluates through it.
        REQUIRE(shape.eval(UFCall::make(suffix, {IntImm::make(0)})) == want[0]);
    }
}
