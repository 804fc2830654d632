"""benchmarks.cpu_isa: where two runs part, the host's instruction set, and its flags
refused in one line (the runs themselves: docs/design.md, "Determinism across hosts")."""

from __future__ import annotations

import pytest

from benchmarks import cpu_isa


def _row(update: int, ret: float | None, value: float, kl: float = 1e-7) -> dict:
    return {"update": update, "env_steps": 512 * update, "episode_return": ret,
            "loss/value": value, "loss/approx_kl": kl, "sps": 1e5 + update}


def test_the_runs_part_where_a_float_first_differs_and_then_where_returns_do():
    ref = [_row(1, 20.0, 40.0), _row(2, 26.0, 41.0), _row(3, 30.0, 42.0), _row(4, 35.0, 43.0)]
    other = [_row(1, 20.0, 40.0, kl=2e-7),  # below TINY: rounding, not a difference
             _row(2, 26.0, 41.0 * (1 + 1e-6)), _row(3, 31.0, 42.5), _row(4, None, 43.0)]
    other[0]["sps"] = 7.0  # a clock key
    part = cpu_isa.parting(ref, other)
    assert part["first"] == 2 and part["size"] == pytest.approx(1e-6, rel=1e-3)
    assert part["returns"] == 3
    assert part["gaps"][0] == 0.0 and part["gaps"][2] == pytest.approx(1 / 31)  # the return
    assert cpu_isa.parting(ref, ref) == {"first": None, "size": None, "returns": None,
                                         "gaps": [0.0] * 4}


@pytest.mark.parametrize("flags,isa", [
    ("fpu sse4_2 avx fma avx2 avx512f", "AVX512"),
    ("fpu sse4_2 avx fma avx2", "AVX2 with FMA"),
    ("fpu sse4_2 avx fma", "AVX with FMA"),
    ("fpu sse4_2 avx", "AVX"),
    ("fpu", "unknown"),
])
def test_the_host_isa_is_the_newest_cap_its_flags_give(tmp_path, flags, isa):
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_isa.host_isa(str(tmp_path / "cpuinfo")) == isa
    assert cpu_isa.host_isa(str(tmp_path / "missing")) == "unknown"


@pytest.mark.parametrize("argv,field", [
    (["--isas=host,AVX9"], "--isas"),
    (["--isas=host"], "--isas"),
    (["--isas=AVX,AVX"], "--isas"),
    (["--rounds=0"], "--rounds"),
    (["--seeds=0"], "--seeds"),
    (["--timing_env_steps=0"], "--timing_env_steps"),
    (["--config=configs/nope.py"], "--config"),
])
def test_bad_flags_are_one_line_exit_2(argv, field, capsys):
    with pytest.raises(SystemExit) as exited:
        cpu_isa.parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"config error: {field}:")
