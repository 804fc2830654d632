"""One process against two: jax.distributed on 127.0.0.1 with gloo CPU collectives, 2 fake
devices per process, against the same config on one process with 4 fake devices."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import jax
import pytest

from rlcore.distributed import data_mesh
from tests.helpers import assert_rows_close, read_metrics
from tests.multiprocess_worker import config_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(mode: str, workdir) -> None:
    port = _free_port()
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.multiprocess_worker", mode, str(i), str(port),
         str(workdir)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True) for i in range(2)]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=240)
            outputs.append(out)
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]


@pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")
def test_anakin_one_process_vs_two(tmp_path):
    from anakin.train import train

    single = train(config_for("anakin"), None, mesh=data_mesh(jax.devices()[:4]))
    _two_processes("anakin", tmp_path)
    assert_rows_close(single, read_metrics(tmp_path), tol=1e-4)


@pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")
def test_sebulba_one_process_vs_two(tmp_path):
    from sebulba.train import prepare, train

    config = config_for("sebulba")
    # One process: actors on devices 0 and 2, learners on 1 and 3, as the two processes
    # lay them out (process p owns devices 2p and 2p+1).
    config.actor_device_ids = (0, 2)
    config.learner_device_ids = (1, 3)
    prepare(config)
    single = train(config, None)
    _two_processes("sebulba", tmp_path)
    assert_rows_close(single, read_metrics(tmp_path), tol=1e-4)
