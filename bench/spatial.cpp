// Spatially sparse 3x3 convolutions (cora/Spatial.h, apps/spatial/conv_layer.h) against dense
// convolutions on the same data, in one run: cora over the active tiles of a blob-shaped mask
// (at densities 0.5, 0.3, 0.1, 0.03) against oneDNN's convolution (what PyTorch's CPU conv2d
// calls; brgconv on AVX-512), PyTorch's conv2d (timed by bench/spatial_torch.py, read with
// --torch=FILE) and cora's own dense schedule of the same convolution (the same inner code over
// every tile). Each active-tile run takes the best of a few tile sizes measured in the same run,
// and the time to build the tile list from the mask is measured beside it.
// Every sparse output is checked against cora's dense one on the active tiles (max |diff| over
// max |y| above 1e-4, or a non-finite value: FAIL, exit 1).
//
// Usage: cora_spatial [--markdown=FILE] [--csv=FILE] [--runs=N] [--torch=FILE] [--tile-table=FILE] [--quick]
//   --tile-table: write the fastest tile of the direct route (the faster one, the app's default) per shape and density
//   band (apps/spatial/tile_table.h; the app's --tile auto reads it).
//   --quick: one shape, two densities (a smoke run).
#include <cora/cora.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/error_check.h"
#include "common/timing.h"
#include "spatial/conv_layer.h"
#include "spatial/masks.h"
#include "spatial/tile_table.h"

#ifdef CORA_BENCH_ONEDNN
#include <dnnl.hpp>
#endif

using namespace cora;
using cora::spatial::ConvLayer;
using cora::spatial::ConvShape;

namespace {

struct Case {
    int64_t h, w, c;
};

#ifdef CORA_BENCH_ONEDNN
/** A dense 3x3 convolution, stride 1, padding 1, with bias: NHWC data, weights in the layout
 * oneDNN picks (reordered once, untimed). */
struct OneDnnConv {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    dnnl::memory src, wei, bia, dst;
    dnnl::convolution_forward prim;
    std::string impl;
    OneDnnConv(int64_t h, int64_t w, int64_t c, float *x, const float *w_hwio, float *b, float *y) {
        using tag = dnnl::memory::format_tag;
        using dt = dnnl::memory::data_type;
        dnnl::memory::desc sd({1, c, h, w}, dt::f32, tag::nhwc), dd({1, c, h, w}, dt::f32, tag::nhwc),
            wd({c, c, 3, 3}, dt::f32, tag::any), bd({c}, dt::f32, tag::x);
        auto desc =
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, sd,
                                            wd, bd, dd, {1, 1}, {1, 1}, {1, 1});
        auto pd = dnnl::convolution_forward::primitive_desc(desc, eng);
        impl = pd.impl_info_str();
        dnnl::memory user_w(dnnl::memory::desc({c, c, 3, 3}, dt::f32, tag::hwio), eng, const_cast<float *>(w_hwio));
        wei = dnnl::memory(pd.weights_desc(), eng);
        dnnl::reorder(user_w, wei).execute(strm, user_w, wei);
        strm.wait();
        src = dnnl::memory(sd, eng, x);
        bia = dnnl::memory(bd, eng, b);
        dst = dnnl::memory(dd, eng, y);
        prim = dnnl::convolution_forward(pd);
    }
    void run() {
        prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bia}, {DNNL_ARG_DST, dst}});
        strm.wait();
    }
};
#endif

/** PyTorch's times (bench/spatial_torch.py): "H W C ms" per line. */
std::map<std::string, double> read_torch(const std::string &path) {
    std::map<std::string, double> t;
    if (path.empty()) return t;
    std::ifstream in(path);
    int64_t h, w, c;
    double ms;
    while (in >> h >> w >> c >> ms)
        t[std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c)] = ms;
    return t;
}

std::string fmt(const char *f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

/** The benchmark; its errors (a file that cannot be written, cora's) end as one line and exit 1. */
int run(int argc, char **argv) {
    std::string markdown, csv, torch_file, tile_table;
    int runs = 5;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("--markdown=", 0) == 0)
            markdown = a.substr(11);
        else if (a.rfind("--csv=", 0) == 0)
            csv = a.substr(6);
        else if (a.rfind("--torch=", 0) == 0)
            torch_file = a.substr(8);
        else if (a.rfind("--tile-table=", 0) == 0)
            tile_table = a.substr(13);
        else if (a.rfind("--runs=", 0) == 0) {
            try {
                runs = (int)cora::apps::CommandLine::parse_integer("--runs", a.substr(7), 1, 1000);
            } catch (const std::exception &e) {
                std::fprintf(stderr, "cora_spatial: %s\n", e.what());
                return 2;
            }
        } else if (a == "--quick")
            quick = true;
        else {
            std::fprintf(stderr,
                         "cora_spatial: unknown argument '%s' (use --markdown=FILE, --csv=FILE, --runs=N, "
                         "--torch=FILE, --tile-table=FILE, --quick)\n",
                         a.c_str());
            return 2;
        }
    }
    const std::vector<Case> cases =
        quick ? std::vector<Case>{{40, 40, 64}} : std::vector<Case>{{80, 80, 128}, {160, 160, 64}, {20, 20, 512}};
    const std::vector<double> densities =
        quick ? std::vector<double>{0.5, 0.1} : std::vector<double>{0.5, 0.3, 0.1, 0.03};
    const std::vector<std::pair<int64_t, int64_t>> tile_sizes =
        quick ? std::vector<std::pair<int64_t, int64_t>>{{8, 8}}
              : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {4, 8}, {16, 8}, {2, 8}, {1, 8}, {4, 10}};
    const std::map<double, double> target{{0.5, 1.6}, {0.3, 2.8}, {0.1, 6.0}, {0.03, 12.0}};
    std::map<std::string, double> torch = read_torch(torch_file);
    cora::spatial::TileTable measured; // the fastest tile of the direct route per shape and density band

    std::string table =
        "| shape (H x W x C) | density | active tiles | best tile | cora direct ms | cora gather-scatter "
        "ms (tile) | cora dense ms | oneDNN ms | PyTorch ms | faster route vs best dense | target | direct vs "
        "gather-scatter | mask to list ms (% of conv) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::string csv_rows = "shape,density,active_fraction,speedup_vs_best_dense,speedup_vs_cora_dense\n";
    std::string dnnl_impl = "not built (install libdnnl-dev)";
    bool ok = true;
    for (const Case &cs : cases) {
        Param N("N", 1, 64), H("H", 1, 4096), W("W", 1, 4096);
        Dim n("n"), y("y"), x("x"), c("c");
        ShapeTensor mask("mask", {N, H, W}, 0, 1);
        Tensor in("in", {{n, N}, {y, H}, {x, W}, {c, cs.c}});
        ConvShape shape{cs.c, cs.c, 3, 1, false, false};
        ConvLayer dense("dense", in, N, H, W, shape);
        dense.schedule_cpu(nullptr, 8, 8, 32);
        Kernel kd = Pipeline({dense.out}, "conv_dense").compile();
        struct Sparse {
            int64_t th, tw;
            bool gather;
            std::unique_ptr<ConvLayer> layer;
            std::unique_ptr<ActiveTiles> tiles;
            Kernel k;
        };
        std::vector<Sparse> sparse;
        for (bool gather : {false, true})
            for (auto [th, tw] : tile_sizes) {
                auto tiles = std::make_unique<ActiveTiles>(ActiveTiles::from_mask("tiles", mask, th, tw));
                auto layer =
                    std::make_unique<ConvLayer>("sparse", in, N, H, W, shape, nullptr, gather ? tiles.get() : nullptr);
                layer->schedule_cpu(tiles.get(), th, tw, 32);
                Kernel k = Pipeline({layer->out}, gather ? "conv_gathered" : "conv_tiles").compile();
                sparse.push_back(Sparse{th, tw, gather, std::move(layer), std::move(tiles), std::move(k)});
            }
        RaggedShape rs;
        rs.set(N, 1).set(H, cs.h).set(W, cs.w);
        std::vector<int32_t> zeros((size_t)(cs.h * cs.w), 0);
        rs.set(mask, zeros);
        Buffer bin = Buffer::alloc(in, rs), bw = Buffer::alloc(dense.weight, rs), bb = Buffer::alloc(dense.bias, rs);
        Buffer bd = Buffer::alloc(dense.out, rs), bs = Buffer::alloc(dense.out, rs);
        std::mt19937 rng(42);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (Buffer *b : {&bin, &bw, &bb})
            for (int64_t i = 0; i < b->size(); i++)
                b->at(i) = u(rng);
        auto run_dense = [&] { kd.run(rs, {{in, bin}, {dense.weight, bw}, {dense.bias, bb}, {dense.out, bd}}); };
        run_dense();
#ifdef CORA_BENCH_ONEDNN
        std::vector<float> y_dnnl((size_t)bd.size());
        OneDnnConv conv(cs.h, cs.w, cs.c, bin.data<float>(), bw.data<float>(), bb.data<float>(), y_dnnl.data());
        dnnl_impl = conv.impl;
        conv.run();
        {
            cora::apps::ErrorCheck check;
            for (size_t i = 0; i < y_dnnl.size(); i++)
                check.add(y_dnnl[i], bd.at((int64_t)i));
            if (!check.abs_within(1e-4 * std::max(1.0, check.scale()))) {
                std::printf("FAIL: oneDNN and cora's dense convolution disagree (max |diff| %g)%s\n", check.max_abs(),
                            check.non_finite_note().c_str());
                ok = false;
            }
        }
#endif
        const std::string key = std::to_string(cs.h) + "x" + std::to_string(cs.w) + "x" + std::to_string(cs.c);
        const double torch_ms = torch.count(key) ? torch.at(key) : 0.0;
        for (double d : densities) {
            cora::spatial::MaskSet m = cora::spatial::blob_mask(1, cs.h, cs.w, d, (uint32_t)(cs.h * 131 + d * 1000));
            // The list build: binding the mask and building its tiles, as each batch of a stream
            // does (one RaggedShape per stream, its mask bound again for every frame).
            double list_s = 1e30;
            RaggedShape stream;
            stream.set(N, 1).set(H, cs.h).set(W, cs.w);
            for (int r = 0; r < std::max(runs, 3) + 1; r++) {
                auto t0 = std::chrono::steady_clock::now();
                stream.set(mask, m.mask.data(), (int64_t)m.mask.size());
                (void)stream.active_tiles(*sparse[0].tiles);
                double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (r > 0) list_s = std::min(list_s, t); // the first also flattens the layouts, once per shape
            }
            rs.set(mask, m.mask.data(), (int64_t)m.mask.size());
            // The dense baselines again for each mask, next to the sparse runs: this machine's
            // speed drifts between minutes, and ratios are only fair within one stretch.
            cora::apps::let_thread_pools_sleep();
            const double dense_s = cora::apps::best_seconds_warm(runs, run_dense);
            double dnnl_s = 0;
#ifdef CORA_BENCH_ONEDNN
            cora::apps::let_thread_pools_sleep();
            dnnl_s = cora::apps::best_seconds_warm(runs, [&] { conv.run(); });
#endif
            double best_dense_ms = dense_s * 1e3;
            if (dnnl_s > 0) best_dense_ms = std::min(best_dense_ms, dnnl_s * 1e3);
            if (torch_ms > 0) best_dense_ms = std::min(best_dense_ms, torch_ms);
            double best_s = 1e30, best_gather_s = 1e30;
            size_t best = 0, best_gather = 0;
            int64_t active = 0, all = 0;
            for (size_t k = 0; k < sparse.size(); k++) {
                Sparse &s = sparse[k];
                for (int64_t i = 0; i < bs.size(); i++)
                    bs.at(i) = 0.0f;
                auto run = [&] {
                    s.k.run(rs, {{in, bin}, {s.layer->weight, bw}, {s.layer->bias, bb}, {s.layer->out, bs}});
                };
                cora::apps::let_thread_pools_sleep();
                double t = cora::apps::best_seconds_warm(runs, run);
                // Check on the active tiles against the dense output.
                cora::apps::ErrorCheck check;
                for (const auto &tile : rs.active_tiles(*s.tiles))
                    for (int64_t yy = tile[1] * s.th; yy < std::min<int64_t>(cs.h, (tile[1] + 1) * s.th); yy++)
                        for (int64_t xx = tile[2] * s.tw; xx < std::min<int64_t>(cs.w, (tile[2] + 1) * s.tw); xx++)
                            for (int64_t o = 0; o < cs.c; o++) {
                                int64_t e = (yy * cs.w + xx) * cs.c + o;
                                check.add(bs.at(e), bd.at(e));
                            }
                if (!check.abs_within(1e-4 * std::max(1.0, check.scale()))) {
                    std::printf("FAIL: %s at density %.2f, tiles %lldx%lld: max |diff| %g%s\n", key.c_str(), d,
                                (long long)s.th, (long long)s.tw, check.max_abs(), check.non_finite_note().c_str());
                    ok = false;
                }
                if (s.gather) {
                    if (t < best_gather_s) {
                        best_gather_s = t;
                        best_gather = k;
                    }
                } else if (t < best_s) {
                    best_s = t;
                    best = k;
                    active = (int64_t)rs.active_tiles(*s.tiles).size();
                    all = rs.eval(s.tiles->grid_tiles());
                }
            }
            measured.record(cs.h, cs.w, cs.c, m.density(), {sparse[best].th, sparse[best].tw});
            const double sparse_ms = best_s * 1e3, fastest_ms = std::min(sparse_ms, best_gather_s * 1e3);
            const double speedup = best_dense_ms / fastest_ms;
            const double tgt = target.count(d) ? target.at(d) : 0.0;
            table += "| " + std::to_string(cs.h) + " x " + std::to_string(cs.w) + " x " + std::to_string(cs.c) + " | " +
                     fmt("%.2f", d) + " (" + fmt("%.3f", m.density()) + ") | " +
                     fmt("%.0f%%", 100.0 * (double)active / (double)std::max<int64_t>(all, 1)) + " | " +
                     std::to_string(sparse[best].th) + "x" + std::to_string(sparse[best].tw) + " | " +
                     fmt("%.3f", sparse_ms) + " | " + fmt("%.3f", best_gather_s * 1e3) + " (" +
                     std::to_string(sparse[best_gather].th) + "x" + std::to_string(sparse[best_gather].tw) + ") | " +
                     fmt("%.3f", dense_s * 1e3) + " | " + (dnnl_s > 0 ? fmt("%.3f", dnnl_s * 1e3) : "n/a") + " | " +
                     (torch_ms > 0 ? fmt("%.3f", torch_ms) : "n/a") + " | " + fmt("%.2fx", speedup) + " | " +
                     (tgt > 0 ? fmt("%.1fx", tgt) + (speedup >= tgt ? " met" : " missed") : "-") + " | " +
                     fmt("%.2fx", best_gather_s / best_s) + " | " + fmt("%.3f", list_s * 1e3) + " (" +
                     fmt("%.1f%%", 100.0 * list_s * 1e3 / fastest_ms) + ") |\n";
            csv_rows += key + "," + fmt("%.3f", d) + "," +
                        fmt("%.4f", (double)active / (double)std::max<int64_t>(all, 1)) + "," + fmt("%.4f", speedup) +
                        "," + fmt("%.4f", dense_s * 1e3 / fastest_ms) + "\n";
            std::printf("%s density %.2f: direct %.3f ms (tiles %lldx%lld, %lld of %lld active), gather-scatter %.3f "
                        "ms, cora dense %.3f ms, oneDNN %s ms, PyTorch %s ms: %.2fx the best dense; list %.3f ms\n",
                        key.c_str(), d, sparse_ms, (long long)sparse[best].th, (long long)sparse[best].tw,
                        (long long)active, (long long)all, best_gather_s * 1e3, dense_s * 1e3,
                        dnnl_s > 0 ? fmt("%.3f", dnnl_s * 1e3).c_str() : "n/a",
                        torch_ms > 0 ? fmt("%.3f", torch_ms).c_str() : "n/a", speedup, list_s * 1e3);
            std::fflush(stdout);
        }
    }
    table += "\noneDNN implementation: " + dnnl_impl + ".\n";
    if (!markdown.empty() && !(std::ofstream(markdown) << table))
        throw std::runtime_error(markdown + ": cannot write the table");
    if (!tile_table.empty()) measured.write(tile_table);
    if (!csv.empty() && !(std::ofstream(csv) << csv_rows)) throw std::runtime_error(csv + ": cannot write the table");
    std::printf("%s", table.c_str());
    if (!ok) std::printf("FAIL: a sparse result disagreed with the dense one\n");
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("cora_spatial", [&] { return run(argc, argv); });
}
