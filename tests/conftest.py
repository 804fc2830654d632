"""Test-wide JAX settings (docs/design.md, "Rooms": tests).

- ``jax_numpy_rank_promotion='raise'``: an implicit broadcast between arrays of different
  rank is an error, so a ``[T, B]`` vs ``[T]`` slip fails loudly instead of broadcasting.
- DeprecationWarnings raised from jax modules are errors. pytest's ``filterwarnings`` in
  pyproject.toml already does this inside tests; the filter here also covers code that runs
  at import and collection time.

- The test session runs on 4 fake CPU devices (``--xla_force_host_platform_device_count=4``,
  set here before JAX starts), so one-device-versus-four tests and Sebulba's actor/learner
  splits run in-process; a test that wants one device builds a mesh of ``jax.devices()[:1]``.
  Tests that start a subprocess (multi-process, entry points) set their own environment.
"""

import atexit
import os
import shutil
import tempfile
import warnings

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()

# Fast compiles for every test not marked `optimized` (tests/fast_compile.py says why). This
# process starts JAX's backend without the emitter flag and gets its effect per compile; the
# processes the tests start inherit both settings through the environment.
from tests import fast_compile  # noqa: E402

os.environ["XLA_FLAGS"] = " ".join(
    f for f in os.environ["XLA_FLAGS"].split() if f != fast_compile.XLA_FLAG)
os.environ[fast_compile.ENV] = "1"

import jax  # noqa: E402

jax.devices()  # XLA reads XLA_FLAGS here, once per process
if fast_compile.OLD_EMITTERS:
    os.environ["XLA_FLAGS"] += " " + fast_compile.XLA_FLAG
fast_compile.install()

jax.config.update("jax_numpy_rank_promotion", "raise")
warnings.filterwarnings("error", category=DeprecationWarning, module=r"jax(\.|$)")

# One persistent compilation cache for the session (a fresh directory each session): the
# many tests that train the same program with another seed or another device split of the
# same shapes compile it once. Subprocesses started by tests inherit it through the env.
# Under pytest-xdist the controller imports this file before it starts the workers, so they
# inherit its directory through PODRACER_TEST_JAX_CACHE and only the controller removes it.
# The commands' default cache location (``compile_cache_dir`` empty) is this variable where
# set, so no test writes to the user's cache (runtime/config/xla_flags.py, ``compile_cache_dir``).
if "PODRACER_TEST_JAX_CACHE" in os.environ:
    _CACHE_DIR = os.environ["PODRACER_TEST_JAX_CACHE"]
else:
    _CACHE_DIR = tempfile.mkdtemp(prefix="podracer-jax-cache-")
    os.environ["PODRACER_TEST_JAX_CACHE"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE_DIR
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


# --- parallel runs (pytest-xdist, `make test`) ---------------------------------------------
# Tests that share a module- or session-scoped fixture of ours run on one worker, so no
# shared run or compiled setup is paid twice: each connected set of tests and fixtures is one
# group. Tests without such a fixture are spread one by one. xdist's own `--dist loadgroup`
# cannot see groups under pytest 9.2 (it renames `item._nodeid`, which pytest no longer
# reads), so the workers write the groups to a file and the controller's scheduler reads it.
_GROUPS_FILE = os.path.join(_CACHE_DIR, "xdist_groups.json")


def _shared_fixture_keys(item) -> list[str]:
    keys = []
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the item's fixtures
    for name, defs in (info.name2fixturedefs.items() if info else ()):
        fixturedef = defs[-1]
        if fixturedef.scope not in ("module", "session") or not fixturedef.baseid:
            continue  # pytest's own session fixtures (tmp_path_factory, ...) are cheap
        keys.append(f"{fixturedef.scope}:{fixturedef.baseid}:{name}")
    return keys


def pytest_collection_modifyitems(config, items):
    parent: dict[str, str] = {}

    def find(key):
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    item_keys = {}
    for item in items:
        keys = _shared_fixture_keys(item)
        item_keys[item.nodeid] = keys
        for key in keys:
            parent[find(key)] = find(keys[0])
    # A group is named after its session fixture if it has one, else its first module one.
    names: dict[str, str] = {}
    for key in sorted(parent, key=lambda k: (not k.startswith("session:"), k)):
        names.setdefault(find(key), key)
    groups = {item.nodeid: names[find(item_keys[item.nodeid][0])]
              for item in items if item_keys[item.nodeid]}
    if "PYTEST_XDIST_WORKER" in os.environ:  # every worker writes the same groups
        import json

        # The longest tests first (those marked `optimized` mostly run), so that the last
        # ones handed out are short and both workers finish together; the same order on
        # every worker (the scheduler checks that they collected alike).
        items.sort(key=lambda item: item.get_closest_marker("optimized") is None)

        tmp = f"{_GROUPS_FILE}.{os.environ['PYTEST_XDIST_WORKER']}"
        with open(tmp, "w") as f:
            json.dump(groups, f)
        os.replace(tmp, _GROUPS_FILE)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with our groups as scopes (every other test its own scope);
    it hands out the largest groups first."""
    import json

    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict | None = None

        def _split_scope(self, nodeid):
            if self.groups is None:  # read once the workers have collected
                try:
                    with open(_GROUPS_FILE) as f:
                        self.groups = json.load(f)
                except FileNotFoundError:  # no worker collected a test
                    self.groups = {}
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


# --- per-test wall and CPU seconds (PODRACER_TEST_TIMES=<file>: one JSON line per test) ----


# In-process compile seconds by stage (tracing, lowering, XLA's compile), from JAX's own
# duration events; subprocesses' compiles are in "cpu" only.
_JIT_SECONDS: dict[str, float] = {}
_JIT_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
               "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
               "/jax/core/compile/backend_compile_duration": "compile"}


def _count_jit_seconds(event: str, seconds: float, **_) -> None:
    if event in _JIT_EVENTS:
        key = _JIT_EVENTS[event]
        _JIT_SECONDS[key] = _JIT_SECONDS.get(key, 0.0) + seconds


if os.environ.get("PODRACER_TEST_TIMES"):
    jax.monitoring.register_event_duration_secs_listener(_count_jit_seconds)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("PODRACER_TEST_TIMES")
    if not path:
        yield
        return
    import json
    import resource
    import time

    def cpu():
        own, kids = (resource.getrusage(resource.RUSAGE_SELF),
                     resource.getrusage(resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    wall0, cpu0, jit0 = time.perf_counter(), cpu(), dict(_JIT_SECONDS)
    yield
    line = json.dumps({"test": item.nodeid, "wall": round(time.perf_counter() - wall0, 2),
                       "cpu": round(cpu() - cpu0, 2),
                       **{k: round(v - jit0.get(k, 0.0), 2) for k, v in _JIT_SECONDS.items()},
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "-")})
    with open(path, "a") as f:
        f.write(line + "\n")


@pytest.fixture(autouse=True)
def _compile_settings(request, monkeypatch):
    """A test marked ``optimized`` compiles with LLVM's optimisations (tests/fast_compile.py),
    and the processes it starts with XLA's defaults."""
    if request.node.get_closest_marker("optimized") is None:
        yield
        return
    for name, value in fast_compile.xla_defaults(os.environ).items():
        monkeypatch.setenv(name, value)
    jax.config.update(fast_compile.CONFIG, False)
    try:
        yield
    finally:
        jax.config.update(fast_compile.CONFIG, True)


# --- runs shared by several test files -----------------------------------------------------
# Each is trained once per session: the first test that asks for it pays, the others read it.
# Nothing may write into a shared run's workdir. (How new tests share: docs/design.md, "Rooms".)


@pytest.fixture(scope="session")
def cartpole_ppo_demo_run(tmp_path_factory):
    """``make demo``: configs/cartpole_ppo.py unchanged, its whole budget (500k env steps, one
    CPU device) through the command line. ``proc`` (the finished ``make``, exit 0), ``workdir``
    (checkpoints, config.json, metrics.jsonl) and ``rows`` (metrics.jsonl). test_demo.py
    checks its console, the Anakin PPO threshold test its rows, the evaluate tests evaluate
    its final checkpoint: the one config trained once instead of three times."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from tests.helpers import REPO, entry_env, read_metrics

    workdir = tmp_path_factory.mktemp("cartpole_ppo_demo") / "demo"
    # -o: take the venv stamp as up to date (the install step is not what is measured);
    # PY: this interpreter, whatever venv runs the tests.
    proc = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "demo",
         f"PY={sys.executable}", f"DEMO_DIR={workdir}"],
        cwd=REPO, env=entry_env(optimized=True), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return SimpleNamespace(proc=proc, workdir=workdir, rows=read_metrics(str(workdir)))
