/** \file The encoder on a backend that runs GPU schedules (`transformer_encoder --device`): the
 * five kernels of encoder_def.h with EncoderOptions::gpu, compiled just in time for the backend
 * ("cuda", "cuda-cpu-threads" or "cuda-emulated"), run layer after layer.
 *
 * On the backends with device memory ("cuda", and "cuda-cpu-threads", whose device memory is host
 * memory) the weights are copied to the device once per model, the token tensors live there for
 * the batch, all kernels share one device state (Kernel::share_device_with), so the ragged
 * shape's arrays go to the device once per batch for all kernels of all layers, and the launches
 * are queued on one stream with no synchronisation until the batch's end. "cuda-emulated" runs
 * the same kernels on host buffers. With fp16 the token tensors and weight matrices are float16
 * (converted here from and to the app's float32, rounding to nearest even). */
#pragma once

#include <cora/cora.h>

#include "encoder_def.h"
#include "encoder_model.h"

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cora::apps {

/** What a run of the encoder over one batch offers the app, on the CPU or on a device. */
class EncoderRun {
public:
    virtual ~EncoderRun() = default;
    /** Floats of the packed token tensor (tokens padded to kTokenPad, x hidden). */
    virtual int64_t token_floats() const = 0;
    /** The input tokens (token_floats() floats, packed). */
    virtual void set_input(const std::vector<float> &tokens) = 0;
    /** Every layer, on the current tokens; the result replaces them. */
    virtual void run() = 0;
    virtual std::vector<float> output() = 0;
    /** Seconds spent in each of the five kernels by run() since construction (when profiling). */
    std::array<double, 5> kernel_seconds{};
    int64_t profiled_runs = 0;
    bool profile = false;

protected:
    /** Adds the time since `t` to kernel k's total and restarts `t` (when profiling). */
    void lap(std::chrono::steady_clock::time_point &t, size_t k) {
        if (!profile) return;
        auto now = std::chrono::steady_clock::now();
        kernel_seconds[k] += std::chrono::duration<double>(now - t).count();
        t = now;
    }
};

/** `values` as the element type of `t` (float32, or float16 rounded to nearest even). */
inline Buffer typed_buffer(const Tensor &t, const std::vector<float> &values) {
    Buffer b(t.type(), (int64_t)values.size());
    for (size_t i = 0; i < values.size(); i++)
        if (t.type() == Float16)
            b.data<uint16_t>()[i] = cora_float_to_half(values[i]);
        else
            b.data<float>()[i] = values[i];
    return b;
}

/** A float32 or float16 buffer's values as float32. */
inline std::vector<float> float_values(const Buffer &b) {
    std::vector<float> v((size_t)b.size());
    for (size_t i = 0; i < v.size(); i++)
        v[i] = b.type() == Float16 ? cora_half_to_float(b.data<uint16_t>()[i]) : b.data<float>()[i];
    return v;
}

/** The five kernels compiled for a backend, with the model's weights where they read them;
 * shared by every batch's DeviceEncoder. */
class DeviceEncoderKernels {
public:
    /** `panels`: the weights in the kernels' layout (kernel_weights). `mask_full`: causal attention
     * computed as full attention with a mask. `fp16`: float16 token tensors and weight matrices
     * (EncoderOptions::fp16). RuntimeError when the backend cannot run here. */
    DeviceEncoderKernels(const Backend &device, const EncoderConfig &c, const std::vector<LayerWeights> &panels,
                         bool mask_full = false, bool fp16 = false)
        : config(c), on_device(device.name() != "cuda-emulated") {
        EncoderOptions o;
        o.causal = c.causal;
        o.gelu = c.gelu;
        o.mask_full = mask_full;
        o.gpu = true;
        o.fp16 = fp16;
        const char *names[5] = {"qkv", "attention", "out_norm", "ff1", "ff2_norm"};
        for (size_t k = 0; k < 5; k++) {
            defs[k] = make_encoder_kernel(kOrder[k], o);
            kernels.push_back(Pipeline({defs[k]->output()}, std::string("encoder_gpu_") + names[k] +
                                                                (c.causal ? (mask_full ? "_masked" : "_causal") : "") +
                                                                (c.gelu && k == 3 ? "_gelu" : "") +
                                                                (fp16 ? "_fp16" : ""))
                                  .compile(device.name()));
            if (k > 0 && on_device) kernels[k].share_device_with(kernels[0]);
        }
        // The weights as the kernels take them (float16 matrices with fp16), once per model; on a
        // device backend copied there, once.
        RaggedShape model = shape({1});
        for (const LayerWeights &l : panels) {
            LayerBuffers host;
            DeviceLayerBuffers dev;
            for (size_t k = 0; k < 5; k++) {
                const std::vector<Tensor> &in = defs[k]->inputs;
                for (size_t a = 0; a < in.size(); a++) {
                    const std::vector<float> *w = weight_of(l, k, a);
                    if (!w) continue;
                    host[k].push_back(typed_buffer(in[a], *w));
                    if (!on_device) continue;
                    dev[k].push_back(kernels[k].alloc(in[a], model));
                    dev[k].back().upload(host[k].back());
                }
            }
            if (on_device)
                device_weights.push_back(std::move(dev));
            else
                host_weights.push_back(std::move(host));
        }
    }

    /** A shape binding every kernel's params (each kernel declares its own) to a batch of `lengths`. */
    RaggedShape shape(const std::vector<int32_t> &lengths) const {
        RaggedShape s;
        for (const auto &def : defs) {
            const EncoderDims &D = def->dims;
            s.set(D.B, (int64_t)lengths.size()).set(D.len, lengths).set(D.NH, config.heads).set(D.FB, config.ff / 64);
        }
        return s;
    }

    /** The token tensors the kernels pass along: each kernel's arguments are its inputs, then its output. */
    enum Tokens { X, QKV, Att, X1, F, kTokenTensors };
    /** Kernel k's argument a (an index into its inputs; inputs.size(): the output): a token tensor,
     * or -1 for a weight. */
    static int token_argument(size_t k, size_t a) {
        static const std::vector<int> args[5] = {
            {X, -1, -1, QKV},             // qkv: X, W, bias -> QKV
            {QKV, Att},                   // attention: QKV -> A
            {Att, X, -1, -1, -1, -1, X1}, // out_norm: In, Residual, W, bias, gamma, beta -> X1
            {X1, -1, -1, F},              // ff1: X, W, bias -> F
            {F, X1, -1, -1, -1, -1, X}};  // ff2_norm: In, Residual, W, bias, gamma, beta -> X
        return args[k][a];
    }
    /** The host array of layer `l`'s weight argument a of kernel k (nullptr: a token tensor). */
    static const std::vector<float> *weight_of(const LayerWeights &l, size_t k, size_t a) {
        static const std::vector<std::vector<float> LayerWeights::*> w[5] = {
            {nullptr, &LayerWeights::wqkv, &LayerWeights::bqkv},
            {nullptr},
            {nullptr, nullptr, &LayerWeights::wo, &LayerWeights::bo, &LayerWeights::ln1_gamma, &LayerWeights::ln1_beta},
            {nullptr, &LayerWeights::w1, &LayerWeights::b1},
            {nullptr, nullptr, &LayerWeights::w2, &LayerWeights::b2, &LayerWeights::ln2_gamma,
             &LayerWeights::ln2_beta}};
        return a < w[k].size() && w[k][a] ? &(l.*w[k][a]) : nullptr;
    }
    /** The tensor a token tensor is allocated as: its producer's output (X: qkv's input). */
    Tensor token_tensor(int t) const {
        const size_t k = producer(t);
        return t == X ? defs[0]->inputs[0] : Tensor(defs[k]->output());
    }
    /** The kernel whose output the token tensor is (X, the encoder's input: qkv, which reads it). */
    size_t producer(int t) const {
        for (size_t k = 0; k < 5; k++)
            if (t != X && token_argument(k, defs[k]->inputs.size()) == t) return k;
        return 0;
    }

    static constexpr EncoderKernel kOrder[5] = {EncoderKernel::Qkv, EncoderKernel::Attention, EncoderKernel::OutNorm,
                                                EncoderKernel::FeedForward1, EncoderKernel::FeedForward2Norm};
    EncoderConfig config;
    const bool on_device; ///< device memory (not "cuda-emulated", which runs on host buffers)
    std::array<std::unique_ptr<EncoderKernelDef>, 5> defs;
    std::vector<Kernel> kernels;
    /** Per kernel, its weight arguments in order: on the host ("cuda-emulated") or on the device.
     * Per layer; mutable since a binding takes a non-const buffer (the kernels only read them). */
    using LayerBuffers = std::array<std::vector<Buffer>, 5>;
    using DeviceLayerBuffers = std::array<std::vector<DeviceBuffer>, 5>;
    mutable std::vector<LayerBuffers> host_weights;
    mutable std::vector<DeviceLayerBuffers> device_weights;
};

/** The encoder over one batch on the kernels' backend: the token tensors on the device (or on the
 * host for "cuda-emulated"), run() queues every layer's launches and waits for the last. */
class DeviceEncoder : public EncoderRun {
public:
    DeviceEncoder(const DeviceEncoderKernels &k, const std::vector<int32_t> &lengths)
        : k_(k), shape_(k.shape(lengths)) {
        for (int t = 0; t < DeviceEncoderKernels::kTokenTensors; t++) {
            const Tensor tensor = k_.token_tensor(t);
            host_[(size_t)t] = Buffer::alloc(tensor, shape_);
            if (k_.on_device) device_[(size_t)t] = k_.kernels[k_.producer(t)].alloc(tensor, shape_);
        }
    }
    int64_t token_floats() const override { return host_[DeviceEncoderKernels::X].size(); }
    void set_input(const std::vector<float> &tokens) override {
        Buffer &x = host_[DeviceEncoderKernels::X];
        if ((int64_t)tokens.size() != x.size())
            throw RuntimeError("encoder input: " + std::to_string(tokens.size()) + " floats, the batch takes " +
                               std::to_string(x.size()));
        x = typed_buffer(k_.token_tensor(DeviceEncoderKernels::X), tokens);
        if (k_.on_device) device_[DeviceEncoderKernels::X]->upload(x);
    }
    void run() override {
        if (profile) profiled_runs++;
        auto t = std::chrono::steady_clock::now();
        for (size_t l = 0; l < (size_t)k_.config.layers; l++)
            for (size_t k = 0; k < 5; k++) {
                size_t w = 0;
                if (k_.on_device) {
                    std::vector<DeviceBinding> b;
                    for_each_argument(k, [&](const Tensor &tensor, int tok) {
                        b.emplace_back(tensor, tok >= 0 ? *device_[(size_t)tok] : k_.device_weights[l][k][w++]);
                    });
                    k_.kernels[k].run(shape_, b);
                    if (profile) k_.kernels[k].synchronize();
                } else {
                    std::vector<Binding> b;
                    for_each_argument(k, [&](const Tensor &tensor, int tok) {
                        b.emplace_back(tensor, tok >= 0 ? host_[(size_t)tok] : k_.host_weights[l][k][w++]);
                    });
                    k_.kernels[k].run(shape_, b);
                }
                lap(t, k);
            }
        if (k_.on_device) k_.kernels[0].synchronize();
    }
    std::vector<float> output() override {
        Buffer &x = host_[DeviceEncoderKernels::X];
        if (k_.on_device) device_[DeviceEncoderKernels::X]->download(x);
        return float_values(x);
    }
    /** Whether the tensors live in device memory (not "cuda-emulated"). */
    bool on_device() const { return k_.on_device; }
    /** Transfers of the shape's arrays to the device so far, for all kernels together. */
    int64_t shape_transfers() const { return k_.on_device ? k_.kernels[0].shape_transfers() : 0; }

private:
    /** Calls f(tensor, token tensor or -1) for kernel k's arguments: its inputs, then its output. */
    template <typename F> void for_each_argument(size_t k, F &&f) const {
        const std::vector<Tensor> &in = k_.defs[k]->inputs;
        for (size_t a = 0; a < in.size(); a++)
            f(in[a], DeviceEncoderKernels::token_argument(k, a));
        f(Tensor(k_.defs[k]->output()), DeviceEncoderKernels::token_argument(k, in.size()));
    }

    const DeviceEncoderKernels &k_;
    RaggedShape shape_;
    std::array<Buffer, DeviceEncoderKernels::kTokenTensors> host_;
    std::array<std::optional<DeviceBuffer>, DeviceEncoderKernels::kTokenTensors> device_;
};

} // namespace cora::apps
