/** \file `--device` for the apps: the backend the cora kernel runs on, by its name in the built-in
 * registry (cora/Backend.h) — "cpu" (the app's own CPU schedule), or a backend that runs GPU
 * schedules: "cuda" (a GPU), "cuda-emulated" (the device IR on the CPU), "cuda-cpu-threads" (the
 * CUDA source on the CPU). The last two check the schedule on any machine; their timings are not a
 * GPU's. */
#pragma once

#include <cora/cora.h>

#include <string>
#include <vector>

#include "common/cli.h"

namespace cora::apps {

/** The backend --device names; UsageError listing the names otherwise. */
inline const Backend &parse_device(const std::string &text) {
    const BackendRegistry &backends = BackendRegistry::builtin();
    if (const Backend *b = backends.find(text)) return *b;
    const std::vector<std::string> names = backends.names();
    std::string choices;
    for (size_t i = 0; i < names.size(); i++)
        choices += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    throw UsageError("--device must be " + choices + ", got '" + text + "'");
}

/** Milliseconds per run of `p` (a GPU schedule) on `device` (a backend that runs GPU schedules),
 * after one run that leaves its outputs in `bindings`: the median of `runs` calls with the data
 * where the kernel reads it (on a device backend: no copies timed). `label` says where it ran.
 * RuntimeError when the backend cannot run here (no GPU: with the reason). */
inline double run_gpu_schedule(const Backend &device, const Pipeline &p, const RaggedShape &shape,
                               const std::vector<Binding> &bindings, int runs, std::string *label) {
    Kernel k = p.compile(device.name());
    k.run(shape, bindings);
    *label = "cora on '" + device.name() + "': " + device.description() + "; median of runs";
    return k.time_ms(shape, bindings, runs);
}

} // namespace cora::apps
