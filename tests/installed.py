"""The package as a user installs it (``pip install "podracer-rl @ git+URL"``, as the
notebooks' install cell does): a wheel built from this tree, installed non-editable into a
fresh venv outside the checkout (docs/design.md, "Installed package").

The venv gets the wheel alone (``--no-deps --no-index``); its dependencies are the ones of
the interpreter running the tests, seen through a ``.pth`` line naming that interpreter's
site-packages. Directories named in a ``.pth`` file are searched but their own ``.pth``
files are not run, so an editable install of this project there stays inactive: the venv
imports our packages from its wheel only (``installed_venv`` checks that, and that the
wheel's declared requirements are met by what it sees).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys

from tests.helpers import REPO

# Never copied into the tree the wheel is built from: venvs, outputs, build leftovers.
_NOT_SOURCE = shutil.ignore_patterns(".venv*", ".git", "runs", "site", "build", "dist",
                                     "__pycache__", "*.egg-info", ".pytest_cache",
                                     ".ruff_cache", "tmp")
OURS = ("rlcore", "runtime", "envs", "anakin", "sebulba", "benchmarks", "configs")

# Run by the venv's interpreter outside the checkout: where each of our packages comes from,
# the requirements of the installed distribution that what it sees does not meet, and the
# data a user reaches from the package (the Atari table, a shipped config by name, env ids).
_PROBE = r"""
import importlib, json, os, sys
from importlib import metadata
from packaging.requirements import Requirement
files = {p: importlib.import_module(p).__file__ for p in %r}
unmet = []
for text in metadata.requires("podracer-rl") or []:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        if metadata.version(req.name) not in req.specifier:
            unmet.append(text)
    except metadata.PackageNotFoundError:
        unmet.append(text)
import configs
from envs import atari_scores, registry
print(json.dumps({
    "files": files, "unmet": unmet, "atari_games": len(atari_scores.REFERENCE),
    "config": configs.locate("configs/cartpole_ppo.py"),
    "env": list(registry.resolve("CartPole-v1", registry.ANAKIN)[:2]),
}))
"""


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def clean_env(**extra: str) -> dict:
    """The tests' environment without ``PYTHONPATH`` (which may name this checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def build_wheel(tmp: str) -> str:
    """Builds this tree's wheel (a copy of the tree, so no build output lands in the
    checkout) with pip's isolated build, as ``pip install git+URL`` does; its path."""
    src, wheels = os.path.join(tmp, "src"), os.path.join(tmp, "wheels")
    shutil.copytree(REPO, src, ignore=_NOT_SOURCE)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels,
                    src], check=True, env=clean_env(), cwd=tmp)
    (name,) = os.listdir(wheels)
    return os.path.join(wheels, name)


def installed_venv(tmp: str) -> tuple[str, dict]:
    """A fresh venv under ``tmp`` with this tree's wheel installed non-editable, and what
    its interpreter reports from outside the checkout (``_PROBE``): the venv and that."""
    wheel, venv = build_wheel(tmp), os.path.join(tmp, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    purelib = subprocess.run([venv_python(venv), "-c", "import sysconfig; print(sysconfig."
                              "get_path('purelib'))"], check=True, capture_output=True,
                             text=True).stdout.strip()
    with open(os.path.join(purelib, "_podracer_test_dependencies.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", venv_python(venv), "install",
                    "--quiet", "--no-deps", "--no-index", wheel], check=True, env=clean_env())
    outside = os.path.join(tmp, "outside")
    os.makedirs(outside)
    probe = subprocess.run([venv_python(venv), "-c", _PROBE % (OURS,)], check=True,
                           capture_output=True, text=True, cwd=outside, env=clean_env())
    return venv, json.loads(probe.stdout)


def kernel_spec(tmp: str, venv: str) -> tuple[str, str]:
    """A Jupyter kernel spec running the venv's interpreter: ``(JUPYTER_PATH, kernel name)``."""
    name, path = "podracer-installed", os.path.join(tmp, "jupyter")
    os.makedirs(os.path.join(path, "kernels", name))
    spec = {"argv": [venv_python(venv), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "podracer-rl (installed wheel)", "language": "python"}
    with open(os.path.join(path, "kernels", name, "kernel.json"), "w") as f:
        json.dump(spec, f)
    return path, name
