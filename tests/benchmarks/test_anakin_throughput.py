"""benchmarks.anakin_throughput's breakdown columns: what they are, and never negative; each
row runs in a process whose XLA CPU pool is the one a run of its size gets."""

from __future__ import annotations

import os

import pytest

from benchmarks import anakin_throughput as at


def _result(train_s: float, rollout_s: float, update_s: float) -> dict:
    return {"num_envs": 64, "cpu_threads": 2, "env_sps": 4e6, "train_sps": 64 * 128 / train_s,
            "train_update_s": train_s, "first_call_s": 3.6, "rollout_s": rollout_s,
            "update_s": update_s, "cpu_s_per_1k": at.cpu_s_per_1k(2 * train_s, 64 * 128),
            "train_over_parts": at.train_over_parts(train_s, rollout_s, update_s),
            "compile_cold_s": 4.2, "compile_warm_s": 0.3}


def test_train_over_parts_is_a_ratio_of_durations():
    # The numbers of a 2-core run whose "other ms/update" read -19.22: parts apart 42.9 ms.
    assert at.train_over_parts(0.02369, 0.00549, 0.03742) == pytest.approx(0.5521, abs=1e-4)
    assert at.train_over_parts(0.05, 0.01, 0.03) == pytest.approx(1.25)


@pytest.mark.parametrize("train_s", [0.0237, 0.0429, 0.08])  # below, at and above the parts
def test_breakdown_columns_are_never_negative(train_s):
    row = at.table_rows([_result(train_s, 0.00549, 0.03742)])[0]
    assert len(row) == len(at.HEADERS)
    assert not any(h.startswith("other") for h in at.HEADERS)
    cells = dict(zip(at.HEADERS, row))
    assert cells["train ms/update"] == f"{1e3 * train_s:.2f}"
    assert (cells["compile s (cold cache)"], cells["compile s (warm cache)"]) == ("4.2", "0.3")
    # 2 cores busy for the whole update: 2 * train_s CPU seconds per 64 x 128 steps.
    assert float(cells["CPU s / 1k steps"]) == pytest.approx(2e3 * train_s / (64 * 128),
                                                             abs=1e-4)
    assert float(cells["train / (rollout + update)"]) == pytest.approx(
        train_s / 0.04291, abs=0.005)
    for header, cell in cells.items():
        assert not str(cell).startswith("-"), (header, cell)


def _pool() -> tuple[int, int]:
    """(this process's XLA CPU threads as the benchmark reports them, the pool JAX started)."""
    import jax

    jax.devices()
    names = [open(f"/proc/self/task/{t}/comm").read().strip()
             for t in os.listdir("/proc/self/task")]
    return at.xla_cpu_threads(), names.count("tf_XLAEigen")


@pytest.mark.parametrize("num_envs,threads", [(4, 1), (64, None)])
def test_each_row_starts_jax_with_its_runs_threads(num_envs, threads, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # one CPU device, as a plain run has
    monkeypatch.delenv("PJRT_NPROC", raising=False)
    expected = threads or len(os.sched_getaffinity(0))
    assert at.as_run(at.bench_config("CartPole-v1", num_envs, 128), _pool) == (expected,
                                                                               expected)
    assert "PJRT_NPROC" not in os.environ  # the parent's environment is left as it was
