"""The public face: the names a user calls, exported with ``__all__`` by ``rlcore``,
``anakin``, ``sebulba`` and ``runtime``, loaded lazily, and listed exactly by the API page."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("anakin", "sebulba", "runtime", "rlcore")


def _public() -> set[str]:
    return {f"{p}.{n}" for p in PACKAGES for n in importlib.import_module(p).__all__}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_object(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if home and home != package:  # a re-export: the defining module's own object
            assert getattr(importlib.import_module(home), name, value) is value, name
        assert name in dir(module)


def test_importing_the_packages_loads_no_jax():
    code = ("import sys, rlcore, runtime, anakin, sebulba, rlcore.errors; "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "False"


def test_the_api_page_lists_exactly_the_public_names():
    page = (ROOT / "docs" / "api" / "index.md").read_text()
    listed = set(re.findall(r"^\| `([\w.]+)` \|", page, re.M))
    assert listed == _public()
