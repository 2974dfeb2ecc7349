"""Every Python example in the docs runs: each ```python block of the user guide (§7c), the README
and python/README.md, in a fresh namespace, from a scratch directory."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def blocks(relative):
    with open(os.path.join(ROOT, relative)) as f:
        text = f.read()
    found = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert found, f"no Python examples in {relative}"
    return found


def run_all(relative, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    for number, code in enumerate(blocks(relative)):
        exec(compile(code, f"{relative} (Python example {number + 1})", "exec"), {"__name__": "__doc_example__"})


def test_user_guide_python_examples(tmp_path, monkeypatch):
    run_all("docs/user-guide.md", tmp_path, monkeypatch)


def test_readme_python_example(tmp_path, monkeypatch):
    run_all("README.md", tmp_path, monkeypatch)


def test_package_readme_examples(tmp_path, monkeypatch):
    run_all("python/README.md", tmp_path, monkeypatch)
