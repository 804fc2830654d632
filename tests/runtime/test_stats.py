"""runtime.commands.stats: statistics against hand values, the printed table and its parser."""

from __future__ import annotations

import numpy as np
import pytest

from envs.atari_scores import human_normalized_scores
from runtime.commands.stats import (
    STAT_NAMES,
    EpisodeResults,
    parse_table,
    result_rows,
    results_table,
    summarize,
    t_interval,
)


def test_summarize_against_hand_values():
    stats = summarize([1.0, 2.0, 3.0, 10.0])
    # sample std: sqrt(((-3)^2 + (-2)^2 + (-1)^2 + 6^2) / 3) = sqrt(50 / 3); t_{0.975, 3}
    # = 3.182446305284263 (tables), so ci95 = 3.1824... * sqrt(50 / 3) / 2.
    std = np.sqrt(50.0 / 3.0)
    assert stats == pytest.approx(dict(mean=4.0, ci95=3.182446305284263 * std / 2.0,
                                       median=2.5, std=std, min=1.0, max=10.0))
    one = summarize([7])
    assert one["mean"] == 7.0 and np.isnan(one["std"]) and np.isnan(one["ci95"])
    assert summarize([5.0, 5.0])["ci95"] == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_t_interval_matches_scipy():
    from scipy import stats

    x = [3.0, 9.5, 4.25, 7.0, 11.0]
    mean, half = t_interval(x, confidence=0.9)
    low, high = stats.t.interval(0.9, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert (mean - half, mean + half) == (pytest.approx(low), pytest.approx(high))


def test_results_table_lines():
    table = results_table({"return": [1.0, 3.0], "length": [10, 30]})
    header, ret, length = table.splitlines()
    assert header.split() == list(STAT_NAMES)
    # [1, 3]: sample std sqrt(2), ci95 = t_{0.975, 1} * sqrt(2) / sqrt(2) = 12.706204736
    assert ret.split() == ["return", "2.000", "12.706", "2.000", "1.414", "1.000", "3.000"]
    assert length.split()[0] == "length" and float(length.split()[1]) == 20.0
    parsed = parse_table(f"a header line\n{table}\nvideo: x.mp4 (3 frames of 2x2)\n")
    assert parsed["return"] == dict(mean=2.0, ci95=12.706, median=2.0, std=1.414, min=1.0,
                                    max=3.0)  # as printed, 3 decimals
    assert set(parsed) == {"return", "length"}
    single = parse_table(results_table({"return": [4.0]}))["return"]
    assert single["mean"] == 4.0 and np.isnan(single["ci95"]) and np.isnan(single["std"])


def test_human_normalised_row_only_for_atari():
    results = EpisodeResults(returns=np.asarray([1.7, 31.8]), lengths=np.asarray([5, 9]))
    for env_id in ("CartPole-v1", "Breakout-MinAtar"):
        normalized = human_normalized_scores(env_id, results.returns)
        assert set(result_rows(results, normalized)) == {"return", "length"}
    normalized = human_normalized_scores("Breakout-v5", results.returns)
    rows = result_rows(results, normalized)
    np.testing.assert_allclose(rows["human-normalised"],
                               human_normalized_scores("envpool:Breakout-v5", results.returns))
    # Breakout: random 1.7, human 30.5 (Agent57 table): 1.7 -> 0, 30.5 -> 1.
    np.testing.assert_allclose(human_normalized_scores("Breakout-v5", [1.7, 30.5]),
                               [0.0, 1.0], atol=1e-9)
