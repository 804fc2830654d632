"""Population-based training's exploit and explore step against a NumPy reference on the
same draws (docs/design.md, "Population-based training")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcore import pbt
from rlcore.seeding import pbt_key, pbt_root


def reference(d: pbt.Draws, s: pbt.Explore, statistic, values, agents: dict):
    """The step written as a loop: rank (stable, worst first, NaN lowest), the i-th worst
    copies the ``pick[i]``-th best, then explores its explored values and clips them."""
    statistic = np.where(np.isnan(statistic), -np.inf, statistic)
    order = sorted(range(len(statistic)), key=lambda a: (statistic[a], a))
    n = s.num_exploited
    worst, best = order[:n], order[::-1][:n]
    source = np.arange(len(statistic))
    for i, target in enumerate(worst):
        source[target] = best[int(d.pick[i])]
    new = values[source].copy()
    for a in range(len(source)):
        if source[a] == a:
            continue
        for h, explored in enumerate(s.explored):
            if not explored:
                continue
            if s.method == pbt.PERTURB:
                v = new[a, h] * np.float32(s.factors[int(d.factor[a, h])])
            else:
                v = np.float32(s.choices[h][int(d.choice[a, h])])
            new[a, h] = np.clip(v, np.float32(s.low[h]), np.float32(s.high[h]))
    copied = {k: v[source] for k, v in agents.items()}
    return source, new, copied


def _case(seed: int, a: int, n: int, method: str, ties: bool):
    rng = np.random.default_rng(seed)
    statistic = (rng.integers(0, 3, a) if ties else rng.normal(size=a)).astype(np.float32)
    values = rng.uniform(1e-4, 1e-2, (a, 2)).astype(np.float32)
    s = pbt.Explore(num_exploited=n, explored=(True, False), method=method,
                    factors=(0.8, 1.25), low=(2e-4, 0.0), high=(5e-3, 1.0),
                    choices=((1e-4, 3e-4, 1e-3), (0.5,)))
    agents = {"w": rng.normal(size=(a, 3, 2)).astype(np.float32),
              "count": np.arange(a, dtype=np.int32) * 10}
    return s, statistic, values, agents


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), a=st.integers(2, 9), method=st.sampled_from(pbt.METHODS),
       ties=st.booleans(), frac=st.floats(0.0, 1.0))
def test_step_matches_the_reference(seed, a, method, ties, frac):
    n = 1 + int(frac * (a // 2 - 1))
    s, statistic, values, agents = _case(seed, a, n, method, ties)
    d = pbt.draws(jax.random.key(seed), s, a)
    got_agents, got_values, events = jax.jit(pbt.apply, static_argnums=1)(
        d, s, jnp.asarray(statistic), jnp.asarray(values), jax.tree.map(jnp.asarray, agents))
    source, new, copied = reference(jax.device_get(d), s, statistic, values, agents)
    np.testing.assert_array_equal(events.source, source)
    np.testing.assert_array_equal(events.exploited, source != np.arange(a))
    assert int(np.sum(events.exploited)) == n
    np.testing.assert_allclose(got_values, new, rtol=1e-6)
    np.testing.assert_array_equal(events.old, values)
    for k in agents:
        np.testing.assert_array_equal(got_agents[k], copied[k])


def test_worst_copy_the_best_and_stay_in_bounds():
    """Four agents, one copies: the worst (agent 2) takes the best's (agent 0) state and its
    explored value times 0.8 or 1.25, within the bounds; the unexplored value is copied."""
    s = pbt.Explore(num_exploited=1, explored=(True, False), low=(0.0, 0.0),
                    high=(1.1, 9.0))
    values = jnp.asarray([[1.0, 7.0], [2.0, 6.0], [3.0, 5.0], [4.0, 4.0]])
    agents = {"w": jnp.arange(4.0)}
    out, new, events = pbt.exploit_and_explore(
        jax.random.key(0), s, jnp.asarray([9.0, 1.0, 0.0, 5.0]), values, agents)
    assert events.source.tolist() == [0, 1, 0, 3]
    assert out["w"].tolist() == [0.0, 1.0, 0.0, 3.0]
    assert float(new[2, 0]) in (pytest.approx(0.8), pytest.approx(1.1))
    keep = jnp.asarray([0, 1, 3])
    assert float(new[2, 1]) == 7.0 and new[keep].tolist() == values[keep].tolist()


def test_the_key_is_the_runs_and_the_updates():
    """Steps at other updates or of other seeds draw otherwise; the same ones the same."""
    s = pbt.Explore(num_exploited=2, explored=(True,), low=(0.0,), high=(10.0,))
    one = pbt.draws(pbt_key(pbt_root(0), 5), s, 8)
    assert jax.tree.map(np.array_equal, one, pbt.draws(pbt_key(pbt_root(0), 5), s, 8))
    other = [pbt.draws(pbt_key(pbt_root(0), 6), s, 8), pbt.draws(pbt_key(pbt_root(1), 5), s, 8)]
    for d in other:
        assert not np.array_equal(one.factor, d.factor)


def test_no_events_change_nothing():
    e = pbt.no_events(jnp.zeros(3), jnp.ones((3, 2)))
    assert not e.exploited.any() and e.source.tolist() == [0, 1, 2]
