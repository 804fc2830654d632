"""The seeding rule: rollout-wide key draws equal the per-step derivation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlcore.seeding import (
    ONE_ROUND_MAX,
    map_keys,
    per_env_keys,
    permutation,
    rollout_keys,
    stable_argsort,
)


def test_rollout_keys_equal_per_step_keys():
    root, env_ids = jax.random.key(3), jnp.arange(5, 9)
    keys = rollout_keys(root, env_ids, 7, 6)
    assert keys.shape == (6, 4)
    for t in range(6):
        np.testing.assert_array_equal(jax.random.key_data(keys[t]),
                                      jax.random.key_data(per_env_keys(root, env_ids, 7, t)))
    other = rollout_keys(root, env_ids, 8, 6)
    assert not np.array_equal(jax.random.key_data(keys), jax.random.key_data(other))


@pytest.mark.parametrize("n", [1, 2, 7, 64, 512, 1000, ONE_ROUND_MAX, ONE_ROUND_MAX + 1])
def test_permutation_equals_jax_random_permutation(n):
    """The same bits as JAX's own, for one-round sizes (the fast path) and past them, eagerly
    and vmapped over keys as the learner draws its minibatch blocks."""
    keys = jax.random.split(jax.random.key(n), 6)
    ours = jax.jit(jax.vmap(lambda k: permutation(k, n)))(keys)
    theirs = jax.vmap(lambda k: jax.random.permutation(k, n))(keys)
    assert ours.dtype == jnp.int32 and ours.shape == (6, n)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(permutation(keys[0], n), theirs[0])


@pytest.mark.parametrize("modulus", [2, 97, None])
def test_stable_argsort_orders_ties_by_index(modulus):
    """Equal to a stable key-value sort, with many ties (values modulo 2 and 97), with none,
    and with the extreme values 0 and 2**32 - 1."""
    x = jax.random.bits(jax.random.key(modulus or 0), (3, 513), jnp.uint32)
    if modulus:
        x = x % jnp.uint32(modulus)
    x = x.at[:, :4].set(jnp.array([0, 2**32 - 1, 0, 2**32 - 1], jnp.uint32))
    iota = jnp.broadcast_to(jnp.arange(513, dtype=jnp.int32), x.shape)
    expected = jax.lax.sort_key_val(x, iota, dimension=-1)[1]
    np.testing.assert_array_equal(jax.jit(jax.vmap(stable_argsort))(x), expected)
    with pytest.raises(ValueError, match="more than 32 bits"):
        stable_argsort(jnp.zeros((2**16 + 1,), jnp.uint32))


def test_map_keys_equals_nested_vmaps():
    """A draw of several leaves over ``[T, B]`` keys: the values of ``vmap(vmap(fn))``."""
    keys = rollout_keys(jax.random.key(5), jnp.arange(3, 8), 2, 4)  # [4, 5]

    def draw(k):
        a, b = jax.random.split(k)
        return {"u": jax.random.uniform(a, (3,)), "k": b, "i": jax.random.randint(b, (), 0, 9)}

    ours, nested = map_keys(draw, keys), jax.vmap(jax.vmap(draw))(keys)
    assert ours["u"].shape == (4, 5, 3) and ours["k"].shape == (4, 5)
    np.testing.assert_array_equal(ours["u"], nested["u"])
    np.testing.assert_array_equal(ours["i"], nested["i"])
    np.testing.assert_array_equal(jax.random.key_data(ours["k"]),
                                  jax.random.key_data(nested["k"]))



# Threefry-2x32 (20 rounds) known answers from Random123's kat_vectors (Salmon et al. 2011):
# (key, counter) -> output, as 32-bit words.
THREEFRY_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.smoke  # make test-newest: the hook on the newest JAX
def test_threefry_on_cpu_is_unrolled_where_it_helps_and_keeps_its_known_answers():
    """rlcore.threefry_cpu (imported with rlcore.seeding): before jaxlib 0.11 a compiled draw
    has no loop on CPU, from 0.11 on it keeps JAX's loop; either way the hash gives Random123's
    known answers, compiled and eagerly."""
    from jax.extend.random import threefry_2x32

    from rlcore import threefry_cpu

    unrolled = threefry_cpu.unrolling_helps()
    assert threefry_cpu.use_unrolled_cpu_lowering() == unrolled, "this JAX lacks the hook"
    hlo = jax.jit(lambda k: jax.random.normal(k, (8,))).lower(jax.random.key(0)).as_text()
    assert ("stablehlo.while" not in hlo) == unrolled
    for key, count, expected in THREEFRY_KAT:
        key, count = np.array(key, np.uint32), np.array(count, np.uint32)
        for fn in (threefry_2x32, jax.jit(threefry_2x32)):
            out = np.asarray(fn(key, count))
            assert [hex(v) for v in out] == [hex(v) for v in expected]


@pytest.mark.smoke
@pytest.mark.optimized  # XLA's default optimisations, as a user's run compiles
@pytest.mark.timeout(120)
def test_env_reset_with_draws_in_several_fusions_compiles():
    """The reset of 4 gymnax CartPole envs from fold-in keys (its draw feeds five fusions)
    compiles with XLA's defaults: with the unrolled rounds jaxlib 0.11's CPU compiler did not
    finish it in 200 s (0.3 s with the loop); a hang fails here by the timeout."""
    from anakin.rollout import reset_envs
    from envs.registry import make_jax_env

    env = make_jax_env("CartPole-v1")
    compiled = jax.jit(lambda root: reset_envs(env, root, jnp.arange(4))).lower(
        jax.random.key(0)).compile()
    carry = compiled(jax.random.key(0))
    assert carry.obs.shape == (4, 4)
    assert np.all(np.abs(np.asarray(carry.obs)) <= 0.05)  # CartPole's reset range
