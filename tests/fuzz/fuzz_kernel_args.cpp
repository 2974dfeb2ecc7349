// Fuzz target: the argument checks of JIT kernels (and AOT-style kernels that build their aux
// arrays themselves) fed arbitrary raw arguments. A valid call is built from a random shape, then
// its fields are corrupted: counts, types, scalars, lengths, aux entries, and outputs pointed at
// other arguments. Every array is a separate allocation of exactly its count, so an access past
// what a check allowed is an AddressSanitizer report (the kernels are compiled with the
// sanitizers in this build). The kernel must return CORA_OK or CORA_ERROR_ARGUMENT with a
// message; when it succeeds, the output must be right.
#include <cora/cora.h>

#include "cora_runtime.h"
#include "fuzz_input.h"

using namespace cora;

namespace {

[[noreturn]] void finding() { __builtin_trap(); }

/** One kernel under test with the shape params it needs. */
struct Case {
    Dim batch{"batch"}, seq{"seq"}, k{"k"}, o{"o"}, tok{"tok"}, to{"to"}, ti{"ti"}, r{"r"}, j{"j"}, rank{"rank"};
    Param B{"B", 1, 8};
    LengthArray len{"len", B, 0, 40};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    Func Scale{"Scale", {{batch, B}, {seq, len(batch)}}};
    Tensor X{"X", {{batch, B}, {seq, len(batch)}, {k, 3}}};
    Tensor W{"W", {{k, 3}, {o, 5}}};
    Func Proj{"Proj", {{batch, B}, {seq, len(batch)}, {o, 5}}};
    Func Scores{"Scores", {{batch, B}, {seq, len(batch)}, {j, len(batch)}}};
    std::vector<Kernel> kernels;
    std::vector<std::vector<Tensor>> inputs;
    std::vector<Func> outputs;

    Case() {
        Scale.compute([&](Expr b, Expr s) { return 2.0f * A(b, s); });
        X.fuse_storage(batch, seq, tok, 4);
        Proj.compute([&](Expr b, Expr s, Expr oo) { return sum(r, 3, X(b, s, r) * W(r, oo)); });
        Proj.fuse_storage(batch, seq, tok, 4);
        Proj.fuse(batch, seq, tok).pad_loop(tok, 4).split(tok, to, ti, 4).reorder({to, ti, o});
        Scores.compute([&](Expr b, Expr i, Expr jj) { return A(b, i) * A(b, jj); });
        Scores.remap_longest_first(batch, rank, len(batch) * len(batch)).parallel(rank);
        CompileOptions in_kernel;
        in_kernel.build_aux_in_kernel = true;
        add(Pipeline({Scale}, "fuzz_scale").compile(), {A}, Scale);
        add(Pipeline({Proj}, "fuzz_proj").compile(), {X, W}, Proj);
        add(Pipeline({Scores}, "fuzz_scores").compile(), {A}, Scores);
        add(Pipeline({Proj}, "fuzz_proj_aot").compile(in_kernel), {X, W}, Proj);
    }
    void add(Kernel kern, std::vector<Tensor> in, Func out) {
        kernels.push_back(std::move(kern));
        inputs.push_back(std::move(in));
        outputs.push_back(std::move(out));
    }
};

size_t element_bytes(int32_t type_code) {
    return type_code == CORA_TYPE_INT32 || type_code == CORA_TYPE_FLOAT32 ? 4 : 8;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Case c;
    cora::fuzz::FuzzInput in(data, size);
    const size_t which = in.take<uint8_t>() % c.kernels.size();
    const Kernel &kern = c.kernels[which];

    // A valid call on a random shape.
    RaggedShape shape;
    std::vector<int32_t> lengths((size_t)in.in_range(1, 8));
    for (int32_t &l : lengths)
        l = (int32_t)in.in_range(0, 40);
    shape.set(c.B, (int64_t)lengths.size()).set(c.len, lengths);
    std::vector<Buffer> buffers;
    std::vector<Binding> bindings;
    buffers.reserve(4);
    for (const Tensor &t : c.inputs[which])
        buffers.push_back(Buffer::alloc(t, shape));
    buffers.push_back(Buffer::alloc(c.outputs[which], shape));
    for (size_t t = 0; t < c.inputs[which].size(); t++)
        bindings.emplace_back(c.inputs[which][t], buffers[t]);
    bindings.emplace_back(c.outputs[which], buffers.back());
    std::vector<cora_arg_t> args = kern.make_args(shape, bindings);

    // Every array becomes its own allocation of exactly `count` elements. `room[a]` is the number
    // of bytes really behind args[a].data, whatever its count and type code claim by now: the
    // mutations below never write past it, and a count that claims more than it is only passed
    // with a NULL pointer (a caller that lies about its memory is outside what a check can see).
    std::vector<std::vector<uint8_t>> own(args.size()), retired;
    std::vector<size_t> room(args.size(), 0);
    auto reallocate = [&](size_t a, int64_t count, size_t elem) {
        std::vector<uint8_t> v((size_t)count * elem);
        size_t keep = std::min(v.size(), room[a]);
        if (keep > 0) std::memcpy(v.data(), args[a].data, keep);
        retired.push_back(std::move(own[a])); // other arguments may point into it (aliasing)
        own[a] = std::move(v);
        args[a].data = own[a].empty() ? nullptr : own[a].data();
        args[a].count = count;
        room[a] = own[a].size();
    };
    for (size_t a = 0; a < args.size(); a++)
        if (!args[a].is_scalar) {
            room[a] = (size_t)args[a].count * element_bytes(args[a].type_code); // the valid call's memory
            reallocate(a, args[a].count, element_bytes(args[a].type_code));
        }
    for (size_t a = 0; a < args.size(); a++) // inputs hold small values
        if (!args[a].is_scalar && args[a].type_code == CORA_TYPE_FLOAT32 &&
            kern.arguments()[a].kind == KernelArgInfo::Kind::Input) {
            float *f = static_cast<float *>(args[a].data);
            for (int64_t e = 0; e < args[a].count; e++)
                f[e] = (float)(e % 7) - 3.0f;
        }

    // Corruptions, as many as the input asks for.
    const int rounds = in.take<uint8_t>() % 4;
    for (int round = 0; round < rounds && !in.empty(); round++) {
        size_t a = in.take<uint8_t>() % args.size();
        cora_arg_t &x = args[a];
        const size_t elem = element_bytes(x.type_code);
        switch (in.take<uint8_t>() % 8) {
        case 0: x.type_code = (int32_t)in.in_range(-1, 5); break;
        case 1: x.is_scalar = (int32_t)in.in_range(0, 2); break;
        case 2: x.scalar = in.interesting_int64(); break;
        case 3: reallocate(a, in.in_range(0, 2000), elem); break;
        case 4: { // an element of an integer array (lengths, aux entries)
            int64_t e = x.count > 0 ? in.in_range(0, x.count - 1) : 0;
            if ((size_t)(e + 1) * elem > room[a]) break;
            if (x.type_code == CORA_TYPE_INT32) static_cast<int32_t *>(x.data)[e] = in.interesting_int32();
            if (x.type_code == CORA_TYPE_INT64) static_cast<int64_t *>(x.data)[e] = in.interesting_int64();
            break;
        }
        case 5: { // point this array at another argument's memory
            size_t b = in.take<uint8_t>() % args.size();
            if (room[b] == 0) break;
            x.data = args[b].data;
            room[a] = room[b];
            x.count = std::min<int64_t>(x.count, (int64_t)(room[b] / elem));
            break;
        }
        case 6:
            x.data = nullptr;
            room[a] = 0;
            break;
        default: // any count; NULL data when the memory is not there
            x.count = in.take<uint8_t>() % 2 ? -1 : in.interesting_int64();
            if (x.count > 0 && (size_t)x.count > room[a] / elem) {
                x.data = nullptr;
                room[a] = 0;
            }
            break;
        }
    }

    std::string error;
    int status = kern.run_raw(args, &error);
    if (status != CORA_OK) {
        if (status != CORA_ERROR_ARGUMENT && status != CORA_ERROR_ALLOCATION) finding();
        if (error.empty()) finding();
        return 0;
    }
    if (which == 0) { // Scale: Out = 2 * A, element by element, whatever the (accepted) lengths
        const cora_arg_t &av = args[args.size() - 2], &ov = args.back();
        if (av.count != ov.count) finding();
        for (int64_t e = 0; e < ov.count; e++)
            if (static_cast<const float *>(ov.data)[e] != 2.0f * static_cast<const float *>(av.data)[e]) finding();
    }
    return 0;
}
