// Illegal schedules raise CompileError naming the Func and loop.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {
/** F[b, s] = A[b, s] + 1 over [batch, len(batch)], fresh each time (schedules mutate Funcs). */
Func plus_one(const Tensor &A, const Dim &batch, const Dim &seq, const Param &B, const LengthArray &len) {
    Func F("F", {{batch, B}, {seq, len(batch)}});
    F.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
    return F;
}
} // namespace

TEST_CASE("illegal schedules are rejected with clear messages", "[error][schedule]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si"), bo("bo"), bi("bi"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto fresh = [&] { return plus_one(A, batch, seq, B, len); };
    {
        Func F = fresh();
        F.reorder({seq, batch}); // seq's extent len(batch) needs batch outside
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("schedule of Func 'F': loop 'seq' has extent") &&
                                                         Contains("depends on loop 'batch'") &&
                                                         Contains("must stay outside it"));
    }
    {
        Func F = fresh();
        F.split(batch, bo, bi, 2).reorder({bo, seq, bi}); // seq needs both halves of batch
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("depends on loop 'bi'"));
    }
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.split(seq, so, si, 0), Contains("factor must be positive, got 0"));
        REQUIRE_THROWS_WITH(F.split(other, so, si, 4),
                            Contains("not a loop of this Func: 'other' is not a dim of this Func (its dims: batch, "));
        F.split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(F.split(seq, bo, bi, 2),
                            Contains("not a loop of this Func: 'seq' was split into 'so' and 'si'"));
        REQUIRE_THROWS_WITH(F.split(batch, so, bi, 2), Contains("dim 'so' already names a loop"));
        REQUIRE_THROWS_WITH(F.split(batch, bo, bo, 2), Contains("outer and inner must be different"));
        REQUIRE_THROWS_WITH(F.reorder({si, si}), Contains("'si' is listed twice"));
        REQUIRE_THROWS_WITH(F.parallel(other), Contains("not a loop of this Func: 'other' is not a dim of this Func"));
        REQUIRE_THROWS_WITH(F.parallel(other), !Contains("same name"));
        Dim batch_again("batch"); // a second Dim with a dim's name is another dim
        REQUIRE_THROWS_WITH(
            F.parallel(batch_again),
            Contains("its dim 'batch' is another Dim with the same name: Dims are matched by identity"));
        F.parallel(so);
        REQUIRE_THROWS_WITH(F.unroll(so), Contains("loop 'so' is already marked"));
    }
    {
        Func F = fresh();
        F.vectorize(seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("vectorize in Func 'F': loop 'seq' has extent") && Contains("not a constant"));
    }
    {
        Func F = fresh();
        F.unroll(batch);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("unroll in Func 'F': loop 'batch'"));
    }
    {
        Func F = fresh();
        F.parallel(seq).split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("'seq' was marked (parallel, vectorize, unroll, ...) but is not a loop of the "
                                     "final nest: 'seq' was split into 'so' and 'si'"));
    }
    {
        // The transform named is the one that happened (a fuse, not a split), with the rule to follow.
        Func F = fresh();
        Dim tok("tok");
        F.reorder({batch, seq}).fuse(batch, seq, tok);
        REQUIRE_THROWS_WITH(
            Pipeline({F}).compile(),
            Contains("reorder in Func 'F': not a loop of the final nest: 'batch' was fused into 'tok'") &&
                Contains("reorder names the loops that remain after every split, fuse and remap"));
        Func G = fresh();
        G.unroll(batch).fuse(batch, seq, tok);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("'batch' was fused into 'tok'") && !Contains("was split"));
    }
}

TEST_CASE("illegal fusions, paddings and storage transforms are rejected with clear messages",
          "[error][schedule][fuse][pad]") {
    Dim batch("batch"), seq("seq"), h("h"), kv("kv"), tok("tok"), t2("t2"), so("so"), si("si"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {h, 2}});
    auto fresh = [&] {
        Func F("F", {{batch, B}, {seq, len(batch)}, {h, 2}});
        F.compute([&](Expr b, Expr s, Expr hh) { return A(b, s, hh) + 1; });
        return F;
    };
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.fuse(batch, h, tok), Contains("'h' must be the loop directly inside 'batch'"));
        REQUIRE_THROWS_WITH(F.fuse(batch, other, tok), Contains("'other' is not a dim of this Func"));
        REQUIRE_THROWS_WITH(F.fuse(batch, seq, h), Contains("dim 'h' already names a loop"));
        F.fuse(batch, seq, tok);
        REQUIRE_THROWS_WITH(F.split(seq, so, si, 2), Contains("'seq' was fused into 'tok'"));
        REQUIRE_THROWS_WITH(F.pad_loop(batch, 2), Contains("'batch' was fused into 'tok'"));
        REQUIRE_THROWS_WITH(F.pad_loop(tok, 0), Contains("multiple must be positive, got 0"));
        F.pad_loop(tok, 4);
        REQUIRE_THROWS_WITH(F.pad_loop(tok, 8), Contains("the loop is already padded"));
    }
    {
        // The outer loop's extent must be loop-invariant.
        Func F = fresh();
        F.fuse(seq, h, tok);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("fuse of 'seq' and 'h' in Func 'F'") &&
                                                         Contains("only a loop with a loop-invariant extent"));
    }
    {
        // The inner extent may use only the outer loop.
        Tensor S("S", {{batch, B}, {h, 2}, {kv, len(batch)}});
        Func F("F", {{batch, B}, {h, 2}, {kv, len(batch)}});
        F.compute([&](Expr b, Expr hh, Expr k) { return S(b, hh, k); });
        F.fuse(h, kv, tok);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("depends on loop 'batch', not only on 'h'"));
    }
    {
        // A padded outer loop cannot be ragged-fused: pad the fused loop instead.
        Tensor S("S", {{batch, B}, {seq, len(batch)}});
        Func G("G", {{batch, B}, {seq, len(batch)}});
        G.compute([&](Expr b, Expr s) { return S(b, s); });
        G.pad_loop(batch, 4).fuse(batch, seq, tok);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(), Contains("'batch' is padded") && Contains("bulk padding"));
    }
    {
        // Storage padded less than the loop: the padded iterations would write outside it.
        Func F = fresh();
        F.pad_storage(seq, 4).pad_loop(seq, 8);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("Func 'F': the padded loop writes outside its storage") &&
                                                         Contains("'F' at seq in storage dim 'seq'") &&
                                                         Contains("pad its storage at least as much as the loop"));
        Func G = fresh();
        G.fuse(batch, seq, tok).pad_loop(tok, 8).fuse_storage(batch, seq, t2, 4);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("the padded loop writes outside its storage") && Contains("storage dim 't2'"));
        Func U = fresh();
        U.fuse(batch, seq, tok).pad_loop(tok, 8); // no bulk-padded storage at all
        REQUIRE_THROWS_WITH(Pipeline({U}).compile(), Contains("the padded loop writes outside its storage"));
    }
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.pad_storage(batch, 4), Contains("the extent of 'seq' depends on it"));
        REQUIRE_THROWS_WITH(F.pad_storage(seq, -1), Contains("multiple must be positive, got -1"));
        REQUIRE_THROWS_WITH(F.pad_storage(other, 4), Contains("'other' is not a dim of its storage"));
        REQUIRE_THROWS_WITH(F.fuse_storage(batch, h, tok), Contains("'h' must be the storage dim directly inside"));
        REQUIRE_THROWS_WITH(F.fuse_storage(seq, h, tok), Contains("the extent of 'seq' (len(batch)) depends on"));
        REQUIRE_THROWS_WITH(F.fuse_storage(batch, seq, tok, 0), Contains("bulk padding must be positive"));
        REQUIRE_THROWS_WITH(F.fuse_storage(batch, seq, h), Contains("dim 'h' is already a dim of the tensor"));
        Tensor S("S", {{batch, B}, {seq, len(batch)}, {kv, len(batch)}});
        REQUIRE_THROWS_WITH(S.fuse_storage(batch, seq, tok), Contains("the extent of the inner dim 'kv' depends on"));
        F.fuse_storage(batch, seq, tok, 8);
        REQUIRE_THROWS_WITH(F.fuse_storage(batch, seq, t2), Contains("'batch' is not a dim of its storage"));
        REQUIRE_THROWS_WITH(F.pad_storage(h, 2), Contains("call it before fuse_storage()"));
    }
}

TEST_CASE("illegal remaps are rejected with clear messages", "[error][schedule][remap]") {
    Dim batch("batch"), seq("seq"), rank("rank"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30), perm("perm", B, 0, 7), short_perm("short_perm", 3, 0, 7);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto fresh = [&] { return plus_one(A, batch, seq, B, len); };
    {
        Func F = fresh();
        F.remap_longest_first(seq, rank, seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("remap of 'seq' in Func 'F': its extent (len(batch))") &&
                                                         Contains("only a loop with a loop-invariant extent"));
    }
    {
        Func F = fresh();
        F.remap_longest_first(batch, rank, seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("the cost seq uses 'seq'; it may use only 'batch'"));
    }
    {
        Func F = fresh();
        F.remap(batch, rank, short_perm);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("length array 'short_perm' has 3 elements, fewer than the loop's B"));
    }
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.remap(other, rank, perm), Contains("'other' is not a dim of this Func"));
        REQUIRE_THROWS_WITH(F.remap(batch, seq, perm), Contains("dim 'seq' already names a loop"));
        REQUIRE_THROWS_WITH(F.remap_longest_first(batch, rank, Expr(1.5f)), Contains("the cost must be an integer"));
    }
}

TEST_CASE("illegal horizontal fusions are rejected with clear messages", "[error][schedule][hfuse]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    {
        Func F("F", {{batch, B}, {seq, len(batch)}}), G("G", {{batch, B}, {seq, len(batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
        G.compute([&](Expr b, Expr s) { return F(b, s) * 2; });
        F.hfuse({G});
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("hfuse of Func 'F': 'G' reads 'F'; fused ops must be independent"));
    }
    {
        Func F("F", {{batch, B}, {seq, len(batch)}}), M("M", {{batch, B}, {seq, len(batch)}}),
            G("G", {{batch, B}, {seq, len(batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
        M.compute([&](Expr b, Expr s) { return F(b, s) * 2; });
        G.compute([&](Expr b, Expr s) { return M(b, s) + A(b, s); });
        M.compute_root(); // read once, elementwise: it would be inlined by default
        F.hfuse({G});
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(), Contains("'M', computed between the fused ops, reads 'F'"));
    }
    {
        Func F("F", {{batch, B}}), G("G", {{batch, B}}), H("H", {{batch, B}});
        F.compute([&](Expr b) { return cast(Float32, b); });
        G.compute([&](Expr b) { return cast(Float32, b) * 2; });
        H.compute([&](Expr b) { return cast(Float32, b) * 3; });
        REQUIRE_THROWS_WITH(F.hfuse({}), Contains("no other Func given"));
        REQUIRE_THROWS_WITH(F.hfuse({F}), Contains("cannot be fused with itself"));
        REQUIRE_THROWS_WITH(F.hfuse({G, G}), Contains("'G' is listed twice"));
        F.hfuse({G});
        REQUIRE_THROWS_WITH(H.hfuse({G}), Contains("'G' is already in a horizontal fusion group"));
        REQUIRE_THROWS_WITH(G.hfuse({H}), Contains("already fused into another Func's group"));
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("'G' is not computed by this pipeline"));
    }
    {
        Func F("F", {{batch, B}}), G("G", {{batch, B}, {seq, len(batch)}});
        Dim so("so"), si("si");
        F.compute([&](Expr b) { return cast(Float32, b); });
        G.compute([&](Expr b, Expr s) { return A(b, s); });
        G.reorder({batch, seq}).parallel(seq); // G's outermost loop becomes serial
        F.hfuse({G});
        REQUIRE_THROWS_WITH(Pipeline({F, G}).compile(), Contains("the outermost loops differ in kind"));
    }
}

TEST_CASE("illegal operation splits are rejected with clear messages", "[error][schedule][opsplit]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si"), other("other"), tok("tok");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto fresh = [&] { return plus_one(A, batch, seq, B, len); };
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.split_op(other, 4), Contains("split_op of 'other' in Func 'F': 'other' is not a dim"));
        REQUIRE_THROWS_WITH(F.split_op(seq, seq / 2), Contains("the split point") && Contains("uses 'seq'") &&
                                                          Contains("only the dims outside 'seq'"));
        REQUIRE_THROWS_WITH(F.split_op(batch, batch), Contains("uses 'batch'"));
        REQUIRE_THROWS_WITH(F.split_op(seq, Expr(1.5f)), Contains("must be an integer expression"));
        F.split_op(seq, floor_mult(len(batch), 4));
        Func second = F.split_op(seq, len(batch)); // the head now ends at floor_mult(len, 4)
        REQUIRE(second.name() == "F_tail2");
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("split_op of 'seq' in Func 'F': the split point") &&
                                                         Contains("may exceed the extent"));
    }
    {
        Func F("F", {{batch, B}, {seq, len(batch)}});
        REQUIRE_THROWS_WITH(F.split_op(seq, 1), Contains("define it (compute()) before splitting it"));
    }
    {
        Func F = fresh();
        F.split_op(seq, len(batch) + 1); // past the extent
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("split_op of 'seq' in Func 'F': the split point") &&
                                                         Contains("may exceed the extent") &&
                                                         Contains("clamp it with min()"));
    }
    {
        Func F = fresh();
        F.split_op(seq, len(batch) - 4); // may be negative: len(b) may be 0
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("may be negative"));
    }
    {
        Func F = fresh();
        F.pad_storage(seq, 8);
        Func tail = F.split_op(seq, floor_mult(len(batch), 8));
        F.pad_loop(seq, 8); // padded head rows would write the tail's elements
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("pad_loop of 'seq' in Func 'F': the loop covers 'seq', where the op is split"));
    }
    {
        Func F = fresh();
        Func tail = F.split_op(seq, floor_mult(len(batch), 8));
        F.fuse(batch, seq, tok).pad_loop(tok, 8); // bulk padding appends rows of the tail
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("pad_loop of 'tok' in Func 'F': the loop covers 'seq'"));
    }
    {
        Func F = fresh();
        Func tail = F.split_op(seq, floor_mult(len(batch), 8));
        REQUIRE_THROWS_WITH(tail.pad_storage(seq, 8), Contains("pad_storage of 'F_tail': it is the tail of an op "
                                                               "split and writes the storage of 'F'"));
        REQUIRE_THROWS_WITH(tail.store_in({{batch, B}, {seq, len(batch)}}), Contains("store_in of 'F_tail'"));
        REQUIRE_THROWS_WITH(tail.compute(A(batch, seq)), Contains("already defined"));
        REQUIRE_THROWS_WITH(Pipeline({tail}).compile(),
                            Contains("'F_tail' is the tail of an op split of 'F', not a tensor; read or output 'F'"));
        Func G("G", {{batch, B}, {seq, len(batch)}});
        G.compute([&](Expr b, Expr s) { return tail(b, s) * 2; });
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(), Contains("'F_tail' is the tail of an op split of 'F'"));
    }
}

TEST_CASE("illegal inlining is rejected with clear messages", "[error][schedule][inline]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto consumer = [&](const Func &F) {
        Func G("G", {{batch, B}, {seq, len(batch)}});
        G.compute([&](Expr b, Expr s) { return F(b, s) * 2; });
        return G;
    };
    {
        Func F = plus_one(A, batch, seq, B, len);
        F.compute_inline();
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("compute_inline of Func 'F': it is an output of the pipeline"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        F.compute_inline().split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(Pipeline({consumer(F)}).compile(), Contains("compute_inline of Func 'F': it has a loop "
                                                                        "schedule"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        F.compute_inline().pad_storage(seq, 4);
        REQUIRE_THROWS_WITH(Pipeline({consumer(F)}).compile(), Contains("its storage was changed"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        Func tail = F.split_op(seq, floor_mult(len(batch), 4));
        REQUIRE_THROWS_WITH(tail.compute_inline(),
                            Contains("compute_inline of 'F_tail': it is the tail of an op split"));
        F.compute_inline();
        REQUIRE_THROWS_WITH(Pipeline({consumer(F)}).compile(), Contains("its op is split"));
    }
}

TEST_CASE("illegal compute_at is rejected with clear messages", "[error][schedule][compute_at]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto reader = [&](const Func &F, bool shifted) {
        Func G("G", {{batch, B}, {seq, len(batch)}});
        G.compute([&](Expr b, Expr s) { return F(b, shifted ? len(b) - 1 - s : s) * 2; });
        return G;
    };
    {
        Func F = plus_one(A, batch, seq, B, len);
        REQUIRE_THROWS_WITH(F.compute_at(F, seq), Contains("cannot be computed inside itself"));
        Func G = reader(F, false);
        REQUIRE_THROWS_WITH(F.compute_at(G, other), Contains("'other' is not a dim of 'G'"));
        F.compute_at(G, seq);
        REQUIRE_THROWS_WITH(F.compute_at(G, batch), Contains("already has a compute_at"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, true); // reads the mirrored element: not computed yet at seq
        F.compute_at(G, seq);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("compute_at of Func 'F' in 'G' at 'seq': 'G' reads it at") &&
                                Contains("only the elements at its current 'seq' are computed there"));
        Func H = plus_one(A, batch, seq, B, len);
        Func GH = reader(H, true);
        H.compute_at(GH, batch); // at the row, the whole row is computed: fine
        REQUIRE_NOTHROW(Pipeline({GH}).compile());
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, false);
        G.split(seq, so, si, 4);
        F.compute_at(G, seq);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("at 'seq': 'seq' was split into 'so' and 'si'; compute_at needs the consumer's "
                                     "loops down to 'seq' to be its outermost dims in domain order") &&
                                Contains("schedule only loops inside 'seq', or drop compute_at"));
    }
    {
        // Each combination a new user tried by trial: the message names the rule and the way out.
        Dim rank("rank"), tok("tok");
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, false);
        G.remap_longest_first(batch, rank, len(batch));
        F.compute_at(G, seq);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("the consumer's loop 0 is 'rank' but its dim 0 is 'batch' (in 'G': 'batch' was "
                                     "remapped: its loop is now 'rank')") &&
                                Contains("not split, fused, remapped or reordered"));
        Func F2 = plus_one(A, batch, seq, B, len);
        Func G2 = reader(F2, false);
        G2.fuse(batch, seq, tok);
        REQUIRE_THROWS_WITH(F2.compute_at(G2, tok),
                            Contains("'tok' is not a dim of 'G' (its dims: batch, seq); compute_at names one of the "
                                     "consumer's dims") &&
                                Contains("a loop made by split, fuse or remap cannot be named"));
        F2.compute_at(G2, seq);
        REQUIRE_THROWS_WITH(Pipeline({G2}).compile(), Contains("'seq' was fused into 'tok'; compute_at needs"));
        Func F3 = plus_one(A, batch, seq, B, len);
        Func G3 = reader(F3, false);
        F3.split_op(seq, floor_mult(len(batch), 4));
        F3.compute_at(G3, seq);
        REQUIRE_THROWS_WITH(Pipeline({G3}).compile(),
                            Contains("its op is split (split_op) at dim 'seq', one of the dims it shares with 'G''s "
                                     "loops down to 'seq'") &&
                                Contains("split it at a dim inside them, or drop compute_at (it then runs on its own "
                                         "before 'G') or split_op"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, false);
        F.split(batch, so, si, 2).compute_at(G, seq);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(), Contains("its own loop nest must start with its dims"));
    }
    {
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, false), Mid = reader(F, false);
        Func Out("Out", {{batch, B}, {seq, len(batch)}});
        Out.compute([&](Expr b, Expr s) { return G(b, s) + Mid(b, s); });
        F.compute_at(G, seq);
        // Mid is computed before G and reads F, which would not be computed yet.
        std::string msg;
        try {
            Pipeline({Out}).compile();
        } catch (const CompileError &e) {
            msg = e.what();
        }
        // Depending on the pipeline order, Mid runs before or after G.
        if (!msg.empty()) REQUIRE_THAT(msg, Contains("computed before 'G', reads it"));
    }
    {
        // G's op-split tail runs in one parallel loop with G and reads F: F, computed inside
        // G's iterations, would race with the tail.
        Func F = plus_one(A, batch, seq, B, len);
        Func G = reader(F, false);
        Func tail = G.split_op(seq, floor_mult(len(batch), 4));
        G.hfuse({tail});
        F.compute_at(G, batch);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("'G_tail' runs in one loop with 'G' (hfuse) and reads it"));
        Func F2 = plus_one(A, batch, seq, B, len);
        Func G2 = reader(F2, false);
        G2.split_op(seq, floor_mult(len(batch), 4)); // not fused: the tail runs after G2, F2 is complete
        F2.compute_at(G2, batch);
        REQUIRE_NOTHROW(Pipeline({G2}).compile());
    }
    {
        // Mid is computed at G too, but reads Rs at the previous sentence, whose element was
        // computed in another iteration (another thread: G's batch loop is parallel).
        Tensor C1("C1", {{batch, B}});
        Func Rs("Rs", {{batch, B}}), Mid("Mid", {{batch, B}, {seq, len(batch)}}),
            G("G", {{batch, B}, {seq, len(batch)}});
        Rs.compute([&](Expr b) { return C1(b) + 1; });
        Mid.compute([&](Expr b, Expr s) { return A(b, s) + Rs(max(b - 1, 0)); });
        G.compute([&](Expr b, Expr s) { return Mid(b, s) * Rs(b); });
        Rs.compute_at(G, batch);
        Mid.compute_at(G, batch);
        G.parallel(batch);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("compute_at of Func 'Rs' in 'G' at 'batch': 'Mid' reads it at") &&
                                Contains("but only the elements at its current 'batch' are computed there"));
    }
}

TEST_CASE("illegal reduction loops and caches are rejected with clear messages", "[error][schedule][cache]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si"), k("k"), ko("ko"), ki("ki"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}}), W("W", {{batch, B}, {seq, len(batch)}, {k, 16}});
    auto row_sum = [&] {
        Func S("S", {{batch, B}, {seq, len(batch)}});
        S.compute([&](Expr b, Expr s) { return sum(k, 16, W(b, s, k)); });
        return S;
    };
    {
        Func S = row_sum();
        REQUIRE_THROWS_WITH(S.pad_loop(k, 8), Contains("pad_loop of 'k' in Func 'S': it is a reduction loop") &&
                                                  Contains("would add to the result"));
        REQUIRE_THROWS_WITH(S.vectorize(k), Contains("vectorize of 'k' in Func 'S': it is a reduction loop"));
        REQUIRE_THROWS_WITH(S.parallel(k), Contains("parallel of 'k' in Func 'S': it is a reduction loop"));
        REQUIRE_THROWS_WITH(S.fuse(seq, k, other), Contains("fuse of 'k' in Func 'S': it is a reduction loop"));
        S.split(k, ko, ki, 4);
        REQUIRE_THROWS_WITH(S.vectorize(ki), Contains("vectorize of 'ki' in Func 'S': it is a reduction loop"));
        REQUIRE_THROWS_WITH(S.cache_write(other),
                            Contains("cache_write at 'other' in Func 'S': not a loop of this Func: 'other' is not a "
                                     "dim of this Func"));
    }
    {
        // specialize_interior names one loop of the final nest, once.
        Func S = row_sum();
        REQUIRE_THROWS_WITH(S.specialize_interior(other), Contains("specialize_interior at 'other' in Func 'S': not a "
                                                                   "loop of this Func: 'other' is not a dim"));
        S.specialize_interior(seq);
        REQUIRE_THROWS_WITH(S.specialize_interior(batch),
                            Contains("specialize_interior at 'batch' in Func 'S': it already specializes a loop"));
        Func T = row_sum();
        T.specialize_interior(seq).split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(Pipeline({T}).compile(), Contains("specialize_interior at 'seq' in Func 'S': not a loop of "
                                                              "the final nest: 'seq' was split into 'so' and 'si'"));
    }
    {
        // Tiles need constant extents and a bounded size.
        Func S = row_sum();
        S.cache_write(batch);
        REQUIRE_THROWS_WITH(Pipeline({S}).compile(),
                            Contains("loop 'seq' has extent") && Contains("not a constant; the tile needs constant"));
        Func T = row_sum();
        T.split(seq, so, si, 32768).cache_write(so);
        REQUIRE_THROWS_WITH(Pipeline({T}).compile(), Contains("the tile has 32768 elements, more than 16384"));
    }
    {
        // A reduction whose extent uses a loop cannot move outside that loop.
        Func S("S", {{batch, B}, {seq, len(batch)}});
        S.compute([&](Expr b, Expr s) { return sum(k, s + 1, A(b, k)); });
        S.reorder({batch, k, seq});
        REQUIRE_THROWS_WITH(Pipeline({S}).compile(),
                            Contains("loop 'k' has extent") && Contains("depends on loop 'seq'"));
    }
    {
        Func F("F", {{batch, B}, {seq, len(batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
        REQUIRE_THROWS_WITH(F.cache_read(W, seq), Contains("cache_read of 'W' at 'seq' in Func 'F': the definition "
                                                           "does not read 'W'"));
        REQUIRE_THROWS_WITH(F.cache_read(F, seq), Contains("a Func cannot cache its own storage"));
        F.cache_read(A, batch); // the region in seq is a whole (ragged) row
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("cache_read of 'A' at 'batch' in Func 'F': the region in "
                                                              "dim 'seq' has size") &&
                                                         Contains("not a constant"));
        REQUIRE_THROWS_WITH(F.cache_read(A, seq), Contains("'A' is already cached"));
        // A transposed tile names each of the tensor's dims once; a refused order records nothing.
        Func H("H", {{batch, B}, {seq, len(batch)}, {k, 16}});
        H.compute([&](Expr b, Expr s, Expr kk) { return W(b, s, kk) * 2.0f; });
        H.split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(H.cache_read(W, so, {batch, k, other}),
                            Contains("cache_read of 'W' at 'so' in Func 'H': the tile order names 'other', which is "
                                     "not a dim of 'W' ('batch', 'seq', 'k')"));
        REQUIRE_THROWS_WITH(H.cache_read(W, so, {k, k, seq}), Contains("the tile order names 'k' twice"));
        REQUIRE_THROWS_WITH(
            H.cache_read(W, so, {k, seq}),
            Contains("the tile order names 2 of the 3 dims of 'W' ('batch', 'seq', 'k'); name each once"));
        H.cache_read(W, so, {batch, k, seq}); // not "already cached": the refused orders left no cache
        REQUIRE_THROWS_WITH(H.cache_read(W, so, {batch, k, seq}), Contains("'W' is already cached"));
        Func G("G", {{batch, B}, {seq, len(batch)}});
        G.compute([&](Expr b, Expr s) { return A(b, s) + A(b, 0); });
        G.split(seq, so, si, 4).cache_read(A, so);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(), Contains("it is read at (batch, seq) and at (batch, 0)"));
    }
}
