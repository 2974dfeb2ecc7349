"""The generator command line in Python, as the C++ cora::generator_main (Generator.h):

    python3 -m cora.generator_main FILE.py[:CLASS] -o DIR [-f FUNCTION] [-t TARGETS] [name=value ...]

FILE.py defines cora.Generator subclasses (cora/generator.py); CLASS may be left out when it defines
exactly one. Writes lib<FUNCTION>.so and <FUNCTION>.h to DIR (FUNCTION: the class name in lower
case). A bad command line or definition is one line on stderr and exit status 2.
"""
import argparse
import importlib.util
import os
import sys

from cora import _cora
from cora.generator import Generator, generate


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Usage(message)


def _load(spec):
    path, _, cls = spec.partition(":")
    if not os.path.isfile(path):
        raise _Usage(f"no generator file '{path}'")
    module_spec = importlib.util.spec_from_file_location("cora_generator_module", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    found = {name: obj for name, obj in vars(module).items()
             if isinstance(obj, type) and issubclass(obj, Generator) and obj is not Generator}
    if cls:
        if cls not in found:
            raise _Usage(f"'{path}' defines no generator '{cls}' (it defines: {', '.join(sorted(found)) or 'none'})")
        return found[cls]
    if len(found) != 1:
        raise _Usage(f"'{path}' defines {len(found)} generators ({', '.join(sorted(found)) or 'none'}): "
                     "name one as FILE.py:CLASS")
    return next(iter(found.values()))


def main(argv=None):
    parser = _Parser(prog="python3 -m cora.generator_main", description="Build a Python cora.Generator ahead of time.")
    parser.add_argument("generator", help="FILE.py[:CLASS]")
    parser.add_argument("-o", dest="output_dir", required=True)
    parser.add_argument("-f", dest="function")
    parser.add_argument("-t", dest="targets", default="host")
    parser.add_argument("params", nargs="*", help="name=value")
    try:
        args = parser.parse_intermixed_args(argv)
        params = {}
        for p in args.params:
            name, eq, value = p.partition("=")
            if not eq or not name:
                raise _Usage(f"expected name=value, got '{p}'")
            params[name] = value
        cls = _load(args.generator)
        os.makedirs(args.output_dir, exist_ok=True)
        result = generate(cls, args.output_dir, args.function or cls.__name__.lower(), args.targets, **params)
    except (_Usage, _cora.CompileError, _cora.RuntimeError) as e:
        print(f"cora.generator_main: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the generator's own code failed: one line too (CORA_DEBUG=1: the traceback)
        if os.environ.get("CORA_DEBUG"):
            raise
        print(f"cora.generator_main: {type(e).__name__}: {e} (CORA_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2
    print(f"wrote {result.library} and {result.header}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
