/** \file Pipeline, compile options, Kernel and ahead-of-time libraries. Kernel.run takes a dict
 * from Tensors to arrays (NumPy, PyTorch, anything with __dlpack__ or the buffer protocol) and
 * passes their memory to the kernel as views: nothing is copied, and a wrong element type, device,
 * layout or size raises before anything is written. The GIL is released while the kernel runs. */
#include "array_arg.h"
#include "bindings.h"

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <memory>

namespace cora::python {

namespace {

const char *kind_name(ArgumentKind k) {
    switch (k) {
    case ArgumentKind::Param: return "param";
    case ArgumentKind::LengthArray: return "length_array";
    case ArgumentKind::AuxArray: return "aux_array";
    case ArgumentKind::Input: return "input";
    case ArgumentKind::Output: return "output";
    }
    return "?";
}

CompileOptions compile_options(const std::string &backend, py::kwargs kw) {
    CompileOptions o;
    o.backend = backend;
    for (auto item : kw) {
        std::string key = py::str(item.first);
        py::handle v = item.second;
        if (key == "debug")
            o.debug = v.cast<int>();
        else if (key == "cache_dir")
            o.cache_dir = v.cast<std::string>();
        else if (key == "cxx")
            o.cxx = v.cast<std::string>();
        else if (key == "use_z3")
            o.use_z3 = v.cast<bool>() ? 1 : 0;
        else if (key == "remove_guards")
            o.remove_guards = v.cast<bool>() ? 1 : 0;
        else if (key == "narrow_gpu_indices")
            o.narrow_gpu_indices = v.cast<bool>() ? 1 : 0;
        else if (key == "vector_gpu_copies")
            o.vector_gpu_copies = v.cast<bool>() ? 1 : 0;
        else if (key == "gpu_copy_stages")
            o.gpu_copy_stages = v.cast<int>();
        else if (key == "build_aux_in_kernel")
            o.build_aux_in_kernel = v.cast<bool>();
        else if (key == "device")
            o.device = v.cast<int>();
        else if (key == "vector_bits")
            o.vector_bits = v.cast<int>();
        else if (key == "contraction_tiles")
            o.contraction_tiles = v.cast<std::map<std::string, ContractionTile>>();
        else
            throw py::type_error(
                "compile() got an unknown option '" + key +
                "' (backend, debug, cache_dir, cxx, use_z3, remove_guards, narrow_gpu_indices, "
                "vector_gpu_copies, gpu_copy_stages, build_aux_in_kernel, device, vector_bits, contraction_tiles)");
    }
    return o;
}

bool is_output(const Kernel &k, const Tensor &t) {
    for (const KernelArgInfo &a : k.arguments())
        if (a.kind == ArgumentKind::Output && a.name == t.name()) return true;
    return false;
}

/** The arrays of one call, held (and their DLPack tensors or buffer views released) until it ends. */
struct CallArguments {
    std::vector<std::unique_ptr<ArrayArg>> arrays;
    std::vector<Tensor> tensors;
    std::vector<Buffer> host;
    std::vector<DeviceBuffer> device;
    bool on_device = false;
    const bool host_is_device;

    /** `device_views`: on "cuda-cpu-threads", pass host arrays as device views (run), or as host
     * buffers (time_ms, which takes host buffers on every backend). */
    CallArguments(const Kernel &k, const RaggedShape &shape, const py::dict &bindings, bool device_views = true)
        : host_is_device(device_views && k.backend() == "cuda-cpu-threads") {
        host.reserve(bindings.size());
        device.reserve(bindings.size());
        for (auto item : bindings) {
            if (!py::isinstance<Tensor>(item.first))
                throw py::type_error("Kernel.run: the bindings map Tensors (or Funcs) to arrays, got a key of type " +
                                     std::string(py::str(item.first.get_type().attr("__name__"))));
            Tensor t = item.first.cast<Tensor>();
            arrays.push_back(std::make_unique<ArrayArg>(item.second, t.name()));
            const ArrayArg &a = *arrays.back();
            const std::string who = "argument '" + t.name() + "' of kernel '" + k.name() + "'";
            if (a.is_bytes() || a.type() != t.type())
                throw RuntimeError(who + ": expected " + numpy_dtype_name(t.type()) + " elements, got a " +
                                   a.describe());
            // A kernel on CUDA source run by CPU threads takes host memory as its device memory: its
            // arrays go by device views too, so that nothing is copied (and that path is checked
            // on machines with no GPU).
            const bool host_memory = a.on_host() && !host_is_device;
            if (arrays.size() == 1) on_device = !host_memory;
            if (on_device == host_memory)
                throw RuntimeError(who + " is a " + a.describe() + ", but '" + tensors.front().name() + "' is " +
                                   (on_device ? "on a device" : "in host memory") +
                                   ": a call takes all its arrays in one place");
            tensors.push_back(t);
            if (on_device) {
                if (host_is_device) {
                    if (!a.on_host())
                        throw RuntimeError(who + " is a " + a.describe() + "; backend 'cuda-cpu-threads' runs on " +
                                           "host memory");
                } else if (k.backend() != "cuda") {
                    throw RuntimeError(who + " is a " + a.describe() + "; kernel '" + k.name() +
                                       "' runs on the backend '" + k.backend() +
                                       "', which takes host arrays (compile with backend='cuda' for device tensors)");
                } else if (a.device_id() != k.device()) {
                    throw RuntimeError(who + " is on device " + std::to_string(a.device_id()) + ", the kernel on " +
                                       std::to_string(k.device()));
                }
                if (a.read_only() && k.arguments().size() && is_output(k, t))
                    throw RuntimeError(who + " is an output, but the array is read only");
                device.push_back(k.view(t, shape, a.data(), a.count()));
                continue;
            }
            host.push_back(view(t, shape, a));
        }
    }

    static Buffer view(const Tensor &t, const RaggedShape &s, const ArrayArg &a) {
        void *p = a.data();
        const int64_t n = a.count();
        const Type type = t.type();
        if (a.read_only()) {
            if (type == Float32) return Buffer::view(t, s, static_cast<const float *>(p), n);
            if (type == Float64) return Buffer::view(t, s, static_cast<const double *>(p), n);
            if (type == Int32) return Buffer::view(t, s, static_cast<const int32_t *>(p), n);
            if (type == Int64) return Buffer::view(t, s, static_cast<const int64_t *>(p), n);
            if (type == Float16) return Buffer::view(t, s, static_cast<const uint16_t *>(p), n);
        } else {
            if (type == Float32) return Buffer::view(t, s, static_cast<float *>(p), n);
            if (type == Float64) return Buffer::view(t, s, static_cast<double *>(p), n);
            if (type == Int32) return Buffer::view(t, s, static_cast<int32_t *>(p), n);
            if (type == Int64) return Buffer::view(t, s, static_cast<int64_t *>(p), n);
            if (type == Float16) return Buffer::view(t, s, static_cast<uint16_t *>(p), n);
        }
        throw RuntimeError("tensor '" + t.name() + "' has element type " + type.str() + ", which no array holds");
    }

    std::vector<Binding> host_bindings() {
        std::vector<Binding> b;
        for (size_t i = 0; i < host.size(); i++)
            b.emplace_back(tensors[i], host[i]);
        return b;
    }
    std::vector<DeviceBinding> device_bindings() {
        std::vector<DeviceBinding> b;
        for (size_t i = 0; i < device.size(); i++)
            b.emplace_back(tensors[i], device[i]);
        return b;
    }
};

void run_kernel(const Kernel &k, const RaggedShape &shape, const py::dict &bindings, uintptr_t stream) {
    CallArguments args(k, shape, bindings);
    if (args.on_device) {
        std::vector<DeviceBinding> b = args.device_bindings();
        py::gil_scoped_release nogil;
        k.run(shape, b, reinterpret_cast<void *>(stream));
        // Host arrays are done when run() returns, as on the CPU; device tensors follow the stream.
        if (args.host_is_device) k.synchronize(reinterpret_cast<void *>(stream));
        return;
    }
    std::vector<Binding> b = args.host_bindings();
    py::gil_scoped_release nogil;
    k.run(shape, b);
}

} // namespace

void bind_pipeline(py::module_ &m) {
    py::class_<KernelArgInfo>(m, "ArgumentInfo", "One argument of a compiled kernel, in ABI order.")
        .def_property_readonly("kind", [](const KernelArgInfo &a) { return kind_name(a.kind); })
        .def_readonly("name", &KernelArgInfo::name)
        .def_readonly("type", &KernelArgInfo::type)
        .def_readonly("layout", &KernelArgInfo::layout)
        .def("__repr__", [](const KernelArgInfo &a) {
            return "<cora.ArgumentInfo " + std::string(kind_name(a.kind)) + " " + a.name + " " + a.type.str() + ">";
        });

    py::class_<Kernel>(m, "Kernel", "A pipeline compiled for one backend.")
        .def(
            "run",
            [](const Kernel &k, const RaggedShape &s, const py::dict &b, uintptr_t stream) {
                run_kernel(k, s, b, stream);
            },
            py::arg("shape"), py::arg("bindings"), py::arg("stream") = 0,
            "Run on a shape and a dict {Tensor: array}. Arrays are used in place (no copies); RuntimeError "
            "naming the argument for a wrong element type, size, device or layout, and nothing written. Device "
            "tensors (backend 'cuda') are queued on `stream` (a CUstream as an int; 0: the default stream).")
        .def(
            "__call__", [](const Kernel &k, const RaggedShape &s, const py::dict &b) { run_kernel(k, s, b, 0); },
            py::arg("shape"), py::arg("bindings"))
        .def(
            "time_ms",
            [](const Kernel &k, const RaggedShape &s, const py::dict &b, int reps) {
                CallArguments args(k, s, b, false);
                if (args.on_device) throw RuntimeError("Kernel.time_ms takes host arrays, not device tensors");
                std::vector<Binding> bindings = args.host_bindings();
                py::gil_scoped_release nogil;
                return k.time_ms(s, bindings, reps);
            },
            py::arg("shape"), py::arg("bindings"), py::arg("reps") = 10,
            "Milliseconds per call: the median of `reps` calls after one warm-up.")
        .def_property_readonly("backend", &Kernel::backend)
        .def_property_readonly("name", &Kernel::name)
        .def_property_readonly("arguments", &Kernel::arguments)
        .def_property_readonly("source", &Kernel::source)
        .def_property_readonly("lowered", &Kernel::lowered)
        .def_property_readonly("compile_seconds", &Kernel::compile_seconds)
        .def_property_readonly("from_cache", &Kernel::from_cache)
        .def("prover_report", &Kernel::prover_report)
        .def("__repr__", [](const Kernel &k) { return "<cora.Kernel " + k.name() + " on " + k.backend() + ">"; });

    py::class_<Pipeline>(m, "Pipeline", "Funcs to compute (and every Func they read), compiled together.")
        .def(
            py::init([](const std::vector<Func> &outputs, const std::string &name) { return Pipeline(outputs, name); }),
            py::arg("outputs"), py::arg("name") = "pipeline")
        .def(
            "compile",
            [](const Pipeline &p, const std::string &backend, py::kwargs kw) {
                CompileOptions o = compile_options(backend, kw);
                py::gil_scoped_release nogil; // the C++ compiler may run for seconds
                return p.compile(o);
            },
            py::arg("backend") = "cpu",
            "Lower and compile for a backend ('cpu', 'cuda', 'cuda-emulated', 'cuda-cpu-threads'); options: debug, "
            "cache_dir, cxx, use_z3, remove_guards, narrow_gpu_indices, vector_gpu_copies, gpu_copy_stages (GPU code "
            "generation, for comparison), build_aux_in_kernel, device, vector_bits (the CPU vector width "
            "default schedules tile for; 0: this machine's, negative: no tiles), contraction_tiles ({Func name: "
            "ContractionTile}). Cached by content.")
        .def(
            "lower_to_string",
            [](const Pipeline &p, const std::string &backend, py::kwargs kw) {
                return p.lower_to_string(compile_options(backend, kw));
            },
            py::arg("backend") = "cpu")
        .def(
            "tune",
            [](const Pipeline &p, const std::vector<RaggedShape> &shapes, const std::string &table, double budget,
               int reps, bool retune, py::kwargs kw) {
                TuneOptions o;
                o.compile = compile_options("cpu", kw);
                o.table = table;
                o.budget_seconds = budget;
                o.reps = reps;
                o.retune = retune;
                std::vector<TuneSample> samples;
                for (const RaggedShape &s : shapes)
                    samples.emplace_back(s);
                py::gil_scoped_release nogil; // compiling and timing take seconds
                return p.tune(samples, o);
            },
            py::arg("samples"), py::arg("table") = "", py::arg("budget") = 60.0, py::arg("reps") = 5,
            py::arg("retune") = false,
            "Measure register tiles for the contractions left unscheduled on the sample RaggedShapes (inputs "
            "filled with values in [-1, 1]), keep the winners in a table (default: tuning.txt in the kernel "
            "cache) and compile the winner; a key the table has is not measured again. Compile options as "
            "keywords. Returns a TuneResult (kernel, report, contraction_tiles, ...).")
        .def_property_readonly("name", &Pipeline::name)
        .def_property_readonly("outputs", &Pipeline::outputs);

    py::class_<ContractionTile>(m, "ContractionTile",
                                "The register tile of a contraction left unscheduled (compile option "
                                "contraction_tiles; what Pipeline.tune chooses).")
        .def(py::init([](bool tiled, int rows, int vectors, int panel) {
                 return ContractionTile{tiled, rows, vectors, panel};
             }),
             py::arg("tiled") = true, py::arg("rows") = 4, py::arg("vectors") = 0, py::arg("panel") = 256)
        .def_readwrite("tiled", &ContractionTile::tiled)
        .def_readwrite("rows", &ContractionTile::rows)
        .def_readwrite("vectors", &ContractionTile::vectors)
        .def_readwrite("panel", &ContractionTile::panel)
        .def(py::self == py::self)
        .def("__repr__", [](const ContractionTile &t) {
            return "cora.ContractionTile(tiled=" + std::string(t.tiled ? "True" : "False") +
                   ", rows=" + std::to_string(t.rows) + ", vectors=" + std::to_string(t.vectors) +
                   ", panel=" + std::to_string(t.panel) + ")";
        });
    py::class_<TuneResult>(m, "TuneResult", "What Pipeline.tune did, and the compiled winner.")
        .def_readonly("kernel", &TuneResult::kernel)
        .def_readonly("report", &TuneResult::report)
        .def_readonly("seconds", &TuneResult::seconds)
        .def_readonly("measured", &TuneResult::measured)
        .def_readonly("from_table", &TuneResult::from_table)
        .def_readonly("table_rebuilt", &TuneResult::table_rebuilt)
        .def_property_readonly("contraction_tiles", [](const TuneResult &r) { return r.options.contraction_tiles; });

    py::class_<AotResult>(m, "AotResult", "The files compile_to_library wrote.")
        .def_readonly("library", &AotResult::library)
        .def_readonly("header", &AotResult::header)
        .def_readonly("sources", &AotResult::sources)
        .def_readonly("arguments", &AotResult::arguments);
    m.def(
        "compile_to_library",
        [](py::handle pipelines, const std::string &output_dir, const std::string &function_name,
           const std::string &target, bool keep_sources) {
            AotOptions o;
            o.output_dir = output_dir;
            o.function_name = function_name;
            o.target = target;
            o.keep_sources = keep_sources;
            if (py::isinstance<Pipeline>(pipelines)) {
                Pipeline p = pipelines.cast<Pipeline>();
                py::gil_scoped_release nogil;
                return compile_to_library(p, o);
            }
            std::vector<Pipeline> per_target = pipelines.cast<std::vector<Pipeline>>();
            py::gil_scoped_release nogil;
            return compile_to_library(per_target, o);
        },
        py::arg("pipeline"), py::arg("output_dir"), py::arg("function_name"), py::arg("target") = "host",
        py::arg("keep_sources") = false,
        "Ahead-of-time: write lib<function_name>.so and <function_name>.h for the comma-separated targets "
        "(one Pipeline for all, or a list with one per target: a schedule per target). Load the library with "
        "cora.load_library; cora.Generator and `python3 -m cora.generator_main` build the per-target list.");
    m.def("host_vector_bits", &host_vector_bits, "The vector width in bits of this CPU (512, 256 or 128).");
}

} // namespace cora::python
