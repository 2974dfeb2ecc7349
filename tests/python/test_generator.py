"""Generators in Python: cora.Generator built once per target, cora.generate and the command line
`python3 -m cora.generator_main`, checked by loading and calling what they wrote."""
import os
import subprocess
import sys

import numpy as np
import pytest

import cora
import cora.generator_main  # noqa: F401

GENERATOR_FILE = '''
import cora

class Scale(cora.Generator):
    params = {"factor": (2, "the constant to multiply by"), "vector": (1, "vectorize the loop")}

    def build(self):
        i, io, ii = cora.Dim("i"), cora.Dim("io"), cora.Dim("ii")
        N = cora.Param("N", 1, 1 << 20)
        A = cora.Tensor("A", [(i, N)])
        Out = cora.Func("Out", [(i, N)])
        Out.compute(lambda j: A(j) * float(self.factor))
        if self.vector:  # a schedule per target: one vector register of floats
            Out.split(i, io, ii, self.vector_bits // 32).vectorize(ii)
        return [Out]
'''


@pytest.fixture
def generator_file(tmp_path):
    path = tmp_path / "gens.py"
    path.write_text(GENERATOR_FILE)
    return path


def call(library, n):
    a = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    library(N=n, A=a, Out=out)
    return a, out


def test_generate_per_target_and_parameters(generator_file, tmp_path):
    namespace = {}
    exec(compile(generator_file.read_text(), str(generator_file), "exec"), namespace)
    Scale = namespace["Scale"]
    assert Scale(target="x86-64-v4").vector_bits == 512 and Scale(target="x86-64-v3").vector_bits == 256
    result = cora.generate(Scale, tmp_path, "scale3", targets="x86-64-v3,x86-64", factor=3)
    assert os.path.basename(result.library) == "libscale3.so"
    for n in (1, 7, 8, 100):
        a, out = call(cora.load_library(result.library), n)
        assert (out == 3 * a).all()
    with pytest.raises(cora.CompileError, match=r"unknown generator parameter 'size' \(known: factor, vector\)"):
        cora.generate(Scale, tmp_path, "bad", size=3)
    with pytest.raises(cora.CompileError, match="generator parameter 'factor': 'big' is not an integer"):
        cora.generate(Scale, tmp_path, "bad", factor="big")


def run_cli(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "cora.generator_main", *map(str, args)], capture_output=True, text=True,
                          env=env)


def test_command_line(generator_file, tmp_path):
    out = tmp_path / "out"
    r = run_cli(generator_file, "-o", out, "-f", "scale5", "-t", "host", "factor=5", "vector=false")
    assert r.returncode == 0, r.stderr
    assert (out / "scale5.h").is_file()
    a, got = call(cora.load_library(out / "libscale5.so"), 9)
    assert (got == 5 * a).all()


@pytest.mark.parametrize("args,message", [
    (["{file}:Nope", "-o", "{out}"], "defines no generator 'Nope' (it defines: Scale)"),
    (["{file}", "-o", "{out}", "factor"], "expected name=value, got 'factor'"),
    (["{file}", "-o", "{out}", "factor=x"], "generator parameter 'factor': 'x' is not an integer"),
    (["{file}"], "the following arguments are required: -o"),
    (["/nonexistent/gen.py", "-o", "{out}"], "no generator file '/nonexistent/gen.py'"),
    (["{file}", "-o", "{out}", "-t", "avx9000"], "avx9000"),
    (["{broken}", "-o", "{out}"], "ZeroDivisionError: division by zero"),
])
def test_command_line_errors(generator_file, tmp_path, args, message):
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1 / 0\n")
    r = run_cli(*[a.format(file=generator_file, out=tmp_path / "o", broken=broken) for a in args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cora.generator_main: ") and message in lines[0], r.stderr
