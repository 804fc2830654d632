"""The manual and the front door: the docs build, and what they name exists.

- ``mkdocs build --strict`` passes (mkdocs.yml: every page in the navigation, no broken link
  or anchor, the API pages render from rlcore's docstrings);
- every source path (``rlcore/returns.py``, ``configs/cartpole_ppo.py``, ...) and every
  ``python -m MODULE`` command named in README.md, rlcore/README.md and docs/ exists, and each
  of our commands answers ``--help`` with exit 0;
- no markdown, Python or config file refers to a path outside the repository;
- README.md stays a front door: at most 150 lines, no dates.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("rlcore", "runtime", "envs", "anakin", "sebulba", "configs", "benchmarks", "tests",
         "notebooks", "docs")
# Not the repository's own files: what .gitignore keeps out (venv, runs, the built site, caches,
# the editable install's metadata).
SKIP_DIRS = {".git", ".venv", "site", "runs", "tmp", "__pycache__", ".pytest_cache",
             ".ruff_cache", "build", "dist"}

# `rlcore/returns.py`, `docs/results/x.png`, `envs/data/`: a room, then path characters; not
# preceded by a path character, so `/abs/path/rlcore/x.py` and URLs are not read as ours.
PATH_RE = re.compile(r"(?<![\w/.\-])((?:%s)/[\w\-/]*(?:\.[A-Za-z][\w]*)*)" % "|".join(ROOMS))
MODULE_RE = re.compile(r"python -m ([A-Za-z_][\w.]*)")
DATE_RE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# Places outside the repository a file must not point at (assembled, so this file does not
# match itself).
OUTSIDE = ("../" + "shared", "/" + "work/", "shared/" + "DESIGN.md", "shared/" + "REFERENCE.md")
SCANNED_SUFFIXES = {".md", ".py", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".ipynb", ".sh",
                    ".txt"}
SCANNED_NAMES = {"Makefile"}


def repo_files(predicate) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d == ".ci" or not (
            d in SKIP_DIRS or d.startswith(".") or d.endswith(".egg-info"))]
        found += [Path(dirpath) / name for name in filenames if predicate(Path(name))]
    return sorted(found)


def doc_files() -> list[Path]:
    """README.md, rlcore/README.md and every markdown page under docs/."""
    return [ROOT / "README.md", ROOT / "rlcore" / "README.md",
            *sorted((ROOT / "docs").rglob("*.md"))]


def named_paths(text: str) -> set[str]:
    """Source paths named in ``text``, without globs, placeholders or trailing dots."""
    paths = set()
    for match in PATH_RE.finditer(text):
        path = match.group(1).rstrip(".")
        end = match.end(1)
        if text[end:end + 1] in ("*", "<", "{") or "..." in path:
            continue  # `configs/*.py`, `checkpoints/damaged-<step>`: patterns, not paths
        paths.add(path)
    return paths


def named_modules(text: str) -> set[str]:
    return {m.rstrip(".") for m in MODULE_RE.findall(text)}


def module_exists(module: str) -> bool:
    base = ROOT.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()


def ours(module: str) -> bool:
    return module.split(".")[0] in ROOMS


def test_mkdocs_build_is_strict_clean(tmp_path):
    """The manual builds with --strict: a broken link, an anchor that no heading makes, a page
    missing from the navigation or a docstring mkdocstrings cannot render fails it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    api = (tmp_path / "site" / "api" / "returns" / "index.html").read_text()
    assert "vtrace" in api  # the API pages hold the docstrings, not just a title


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_paths_and_modules_exist(doc):
    text = doc.read_text()
    missing = sorted(p for p in named_paths(text) if not (ROOT / p).exists())
    missing += sorted(f"python -m {m}" for m in named_modules(text)
                      if ours(m) and not module_exists(m))
    assert not missing, f"{doc.relative_to(ROOT)} names what does not exist: {missing}"


def test_the_path_rule_sees_what_it_guards():
    text = ("`rlcore/returns.py`, configs/cartpole_ppo.py. `configs/*.py` "
            "`checkpoints/damaged-<step>` /abs/rlcore/x.py https://x.org/envs/y.py "
            "`python -m anakin.main --help`, `.venv/bin/python -m benchmarks.ablate`.")
    assert named_paths(text) == {"rlcore/returns.py", "configs/cartpole_ppo.py"}
    assert named_modules(text) == {"anakin.main", "benchmarks.ablate"}


def _help(module: str) -> tuple[str, int | None, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "JAX_PLATFORMS": "cpu", "COLUMNS": "100"}
    try:
        proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return module, None, "no answer within 60 s"
    return module, proc.returncode, (proc.stdout + proc.stderr)[-1000:]


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_every_named_command_answers_help():
    """Each distinct ``python -m MODULE`` of ours in the docs exits 0 on ``--help`` (two at a
    time: most import JAX)."""
    modules = sorted({m for doc in doc_files() for m in named_modules(doc.read_text())
                      if ours(m) and module_exists(m)})
    assert {"anakin.main", "sebulba.main", "anakin.evaluate"} <= set(modules), modules
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_help, modules))
    failed = {m: (code, out) for m, code, out in results if code != 0}
    assert not failed, failed


def test_no_file_refers_to_a_path_outside_the_repository():
    this = Path(__file__).resolve()
    offenders = []
    for path in repo_files(lambda p: p.suffix in SCANNED_SUFFIXES or p.name in SCANNED_NAMES):
        if path.resolve() == this:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            hits = [o for o in OUTSIDE if o in line]
            if hits:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {hits}")
    assert not offenders, "\n".join(offenders)


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"
    dated = [f"{n}: {line}" for n, line in enumerate(lines, 1) if DATE_RE.search(line)]
    assert not dated, dated
