"""Output shapes, dtypes and initial scales of the actor-critic networks."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlcore import networks
from rlcore.types import EnvSpec

N = 3  # batch
_IMAGE = EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8", num_actions=6)


@pytest.fixture(scope="module")
def image_params():
    """Initialised params of each image network, once per module.

    The orthogonal init of the 3136 x 512 (Nature) and 3872 x 256 (IMPALA) dense layers is
    a QR decomposition that takes seconds on a small CPU, so the tests share one init.
    """
    cache = {}

    def get(name):
        if name not in cache:
            net = networks.make_network(name, _IMAGE)
            cache[name] = jax.jit(net.init)(jax.random.key(0),
                                            jnp.zeros((1, 4, 84, 84), jnp.uint8))
        return cache[name]

    return get


@pytest.mark.parametrize(
    "name,obs_shape,obs_dtype,num_actions",
    [
        ("mlp", (4,), "float32", 2),  # CartPole
        ("mlp", (10, 10, 4), "float32", 6),  # MinAtar-like
        ("mlp", (10, 10, 4), "bool", 6),  # gymnax MinAtar observations are bool
        ("minatar_cnn", (10, 10, 4), "bool", 3),
        ("nature_cnn", (4, 84, 84), "uint8", 6),
        ("impala_resnet", (4, 84, 84), "uint8", 6),
    ],
)
def test_network_output_shapes_and_dtypes(name, obs_shape, obs_dtype, num_actions,
                                          image_params):
    spec = EnvSpec(obs_shape=obs_shape, obs_dtype=obs_dtype, num_actions=num_actions)
    net = networks.make_network(name, spec)
    rng = np.random.default_rng(0)
    if obs_dtype == "uint8":
        obs = rng.integers(0, 256, size=(N, *obs_shape)).astype(np.uint8)
    else:
        obs = (rng.random((N, *obs_shape)) < 0.5).astype(obs_dtype)
    if obs_dtype == "uint8":
        params = image_params(name)
    else:
        params = jax.jit(net.init)(jax.random.key(0), obs[:1])
    dist, value = jax.jit(net.apply)(params, obs)
    logits = dist.logits
    assert logits.shape == (N, num_actions) and logits.dtype == jnp.float32
    assert value.shape == (N,) and value.dtype == jnp.float32
    assert np.isfinite(np.asarray(logits)).all() and np.isfinite(np.asarray(value)).all()
    # Rows are independent: one observation alone gives the same outputs.
    dist1, value1 = jax.jit(net.apply)(params, obs[1:2])
    np.testing.assert_allclose(dist1.logits[0], logits[1], atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(value1[0], value[1], atol=1e-5, rtol=1e-4)


def _col_norms(kernel):
    return np.linalg.norm(np.asarray(kernel), axis=0)


def test_mlp_orthogonal_init_scales():
    """Hidden layers sqrt(2), policy head 0.01, value head 1.0; biases 0 (PureJaxRL/CleanRL).

    A ``[in, out]`` orthogonal kernel with scale s has orthonormal rows (in <= out) or
    columns (in >= out), times s.
    """
    net = networks.MLPActorCritic(num_actions=4, hidden=(64, 64))
    params = net.init(jax.random.key(0), jnp.zeros((1, 8)))["params"]
    for tower in ("actor", "critic"):
        k0 = np.asarray(params[f"{tower}_0"]["kernel"])  # [8, 64]: rows orthogonal
        np.testing.assert_allclose(k0 @ k0.T, 2.0 * np.eye(8), atol=1e-5)
        k1 = np.asarray(params[f"{tower}_1"]["kernel"])  # [64, 64]
        np.testing.assert_allclose(k1.T @ k1, 2.0 * np.eye(64), atol=1e-4)
    policy = np.asarray(params["policy"]["kernel"])  # [64, 4]: columns orthogonal
    np.testing.assert_allclose(policy.T @ policy, 1e-4 * np.eye(4), atol=1e-8)
    assert np.abs(policy).max() < 0.01
    value = np.asarray(params["value"]["kernel"])  # [64, 1]
    np.testing.assert_allclose(_col_norms(value), [1.0], atol=1e-5)
    for leaf_path, leaf in jax.tree_util.tree_leaves_with_path(params):
        if "bias" in jax.tree_util.keystr(leaf_path):
            np.testing.assert_array_equal(leaf, 0.0)
    # So the initial policy is near uniform.
    dist, _ = net.apply({"params": params}, jax.random.normal(jax.random.key(1), (5, 8)))
    assert np.abs(np.asarray(dist.logits)).max() < 0.1


@pytest.mark.parametrize("name", ["nature_cnn", "impala_resnet"])
def test_image_network_head_scales(name, image_params):
    heads = image_params(name)["params"]["_Heads_0"]
    np.testing.assert_allclose(_col_norms(heads["policy"]["kernel"]), 0.01, rtol=1e-4)
    np.testing.assert_allclose(_col_norms(heads["value"]["kernel"]), 1.0, rtol=1e-4)


def test_minatar_patches_dense_is_a_3x3_valid_conv():
    """MinAtarCNN's first layer (a dense layer over 3x3 patches) equals ``lax.conv`` with
    the same kernel reshaped to ``[3, 3, C, F]``."""
    net = networks.MinAtarCNN(num_actions=3)
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (N, 10, 10, 4))
    params = net.init(jax.random.key(0), obs)
    conv = params["params"]["conv"]
    x = networks.patches(obs.astype(jnp.float32), 3, 3)
    bias = conv["bias"].reshape(1, 1, 1, -1)
    ours = x @ conv["kernel"] + bias
    kernel = conv["kernel"].reshape(3, 3, 4, -1)  # (dy, dx, c) order of the patches
    ref = jax.lax.conv_general_dilated(obs.astype(jnp.float32), kernel, (1, 1), "VALID",
                                       dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert ours.shape == ref.shape == (N, 8, 8, 16)
    np.testing.assert_allclose(ours, ref + bias, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module", params=["lstm", "gru"])
def recurrent_case(request):
    """A recurrent MLP agent (``request.param`` core, 8 units), its params, and a sequence:
    obs ``[6, 4, 3]``, a random start state and episode starts (some mid-sequence)."""
    cell = request.param
    spec = EnvSpec(obs_shape=(3,), obs_dtype="float32", num_actions=2)
    net = networks.make_network("mlp", spec, cell, 8)
    params = jax.jit(lambda k: networks.init_params(net, k, spec))(jax.random.key(0))
    rng = np.random.default_rng(1)
    t, n = 6, 4
    obs = jnp.asarray(rng.normal(size=(t, n, 3)), jnp.float32)
    first = jnp.asarray(rng.random((t, n)) < 0.3).at[0, 0].set(True).at[3, 1].set(True)
    core = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), jnp.float32),
                        net.initial_core(n))
    return cell, net, params, obs, core, first


def test_recurrent_unroll_equals_cell_stepped_by_hand(recurrent_case):
    """The sequence apply (torso, scanned core with resets, heads) equals flax's own cell
    stepped in a Python loop with the core's params, its state set to zeros before each step
    whose observation starts an episode, between the torso and the heads applied apart."""
    cell, net, params, obs, core, first = recurrent_case
    dist, value, core_t = jax.jit(net.apply)(params, obs, core, first)
    logits = dist.logits
    p = params["params"]
    t, n = first.shape
    feat = networks.MLPActorCritic(num_actions=2, heads=False).apply(
        {"params": p["torso"]}, obs.reshape(t * n, 3)).reshape(t, n, -1)
    if cell == "lstm":
        ref_cell, carry = nn.OptimizedLSTMCell(8), (core.c, core.h)
    else:
        ref_cell, carry = nn.GRUCell(8), core.h
    heads = networks._Heads(2)
    for step in range(t):
        keep = ~first[step][:, None]
        carry = jax.tree.map(lambda s, keep=keep: jnp.where(keep, s, 0.0), carry)
        carry, y = ref_cell.apply({"params": p["core"][cell]}, carry, feat[step])
        ref_dist, ref_value = heads.apply({"params": p["heads"]}, y)
        np.testing.assert_allclose(logits[step], ref_dist.logits, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(value[step], ref_value, atol=1e-5, rtol=1e-5)
    ref_h = carry[1] if cell == "lstm" else carry
    np.testing.assert_allclose(core_t.h, ref_h, atol=1e-5, rtol=1e-5)
    if cell == "lstm":
        np.testing.assert_allclose(core_t.c, carry[0], atol=1e-5, rtol=1e-5)
    # A reset really forgets: env 1 restarts at step 3 whatever its start state was.
    other = jax.tree.map(lambda x: x.at[1].set(0.0), core)
    logits_other = jax.jit(net.apply)(params, obs, other, first)[0].logits
    np.testing.assert_allclose(logits_other[3:, 1], logits[3:, 1], atol=1e-6)


def test_recurrent_steps_carry_in_carry_out_equal_unroll(recurrent_case):
    """``step_network`` one observation at a time, the core state carried out of each step
    into the next, gives the unroll's logits, values and final state; ``unroll_network``
    returns the unroll's logits and values."""
    _, net, params, obs, core, first = recurrent_case
    dist, value, core_t = jax.jit(net.apply)(params, obs, core, first)
    logits = dist.logits
    step = jax.jit(lambda o, c, f: networks.step_network(net.apply, params, o, c, f))
    carry = core
    for t in range(obs.shape[0]):
        d, v, carry = step(obs[t], carry, first[t])
        np.testing.assert_allclose(d.logits, logits[t], atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(v, value[t], atol=1e-5, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5),
                 carry, core_t)
    d, v = jax.jit(lambda: networks.unroll_network(net.apply, params, obs, core, first))()
    np.testing.assert_allclose(d.logits, logits, atol=1e-6)
    np.testing.assert_allclose(v, value, atol=1e-6)


@pytest.mark.parametrize("name,obs_shape,recurrent", [
    ("mlp", (4,), "none"), ("mlp", (4,), "gru"), ("minatar_cnn", (10, 10, 4), "none")])
def test_row_stable_rows_do_not_depend_on_the_batch(name, obs_shape, recurrent):
    """``row_stable(step_network)``: each row's logits, value and core state are the same
    bits whether the row comes in a batch of 48, 24, 12 or 1, at any offset (a Sebulba
    actor thread's batch is its share of the envs). Without ``row_stable`` the 12-row
    batches' logits differ from the 48-row batch's on this project's CPUs (by 6e-8 to 1e-6
    for these three networks)."""
    spec = EnvSpec(obs_shape=obs_shape, obs_dtype="float32", num_actions=3)
    net = networks.make_network(name, spec, recurrent, 16)
    params = networks.init_params(net, jax.random.key(0), spec)
    # Away from the init's tiny policy head, so that the logits use all their bits.
    params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(1), p.shape),
                          params)
    rng = np.random.default_rng(2)
    rows = 48
    obs = jnp.asarray(rng.normal(size=(rows,) + obs_shape), jnp.float32)
    core = networks.initial_core(net, rows)
    if core is not None:
        core = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), jnp.float32), core)
    first = jnp.asarray(rng.random(rows) < 0.3)
    step = jax.jit(networks.row_stable(functools.partial(networks.step_network, net.apply)))

    def rows_of(lo, hi):
        cut = functools.partial(jax.tree.map, lambda x: x[lo:hi])
        dist, value, core_out = step(params, obs[lo:hi], cut(core), first[lo:hi])
        return jax.tree.map(np.asarray, (dist.params(), value, core_out))

    whole = rows_of(0, rows)
    for lo, hi in ((0, 12), (12, 24), (24, 48), (5, 17), (7, 8)):
        part = rows_of(lo, hi)
        jax.tree.map(lambda a, b, lo=lo, hi=hi: np.testing.assert_array_equal(
            a, b[lo:hi], err_msg=f"rows {lo}:{hi}"), part, whole)


# (kernel, stride, padding, input H = W): the IMPALA ResNet's 3x3 SAME convs (even and odd
# sizes), the Nature CNN's three VALID ones at their sizes, and a strided SAME one.
CONVS = [((3, 3), 1, "SAME", 11), ((3, 3), 1, "SAME", 10), ((8, 8), 4, "VALID", 84),
         ((4, 4), 2, "VALID", 20), ((3, 3), 1, "VALID", 9), ((3, 3), 2, "SAME", 11)]


@pytest.mark.parametrize("kernel,stride,padding,size", CONVS)
def test_conv_gemm_form_is_flax_conv(kernel, stride, padding, size):
    """``Conv`` has ``nn.Conv``'s params and init (bitwise, same key), its XLA form is
    ``nn.Conv`` bitwise and its GEMM form (patches @ kernel) is ``nn.Conv`` to float roundoff,
    forward and gradient (params and input)."""
    x = jax.random.normal(jax.random.key(0), (2, size, size, 3))
    ref = nn.Conv(5, kernel, (stride, stride), padding=padding)
    params = ref.init(jax.random.key(1), x)

    def loss(module, p, x):  # a nonlinear read of every output
        return jnp.sum(jnp.sin(module.apply(p, x)))

    want = jax.jit(ref.apply)(params, x)
    want_grads = jax.jit(jax.grad(functools.partial(loss, ref), (0, 1)))(params, x)
    # Sums over up to 2 x 400 positions (the 8x8 kernel's gradient): roundoff ~1e-4 relative.
    for form, tol, grad_tol in (("xla", 0.0, 0.0), ("gemm", 1e-5, 1e-4)):
        conv = networks.Conv(5, kernel, stride, padding, form=form)
        mine = conv.init(jax.random.key(1), x)
        jax.tree.map(np.testing.assert_array_equal, mine, params)
        got = jax.jit(conv.apply)(params, x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        grads = jax.jit(jax.grad(functools.partial(loss, conv), (0, 1)))(params, x)
        close = functools.partial(np.testing.assert_allclose, rtol=grad_tol, atol=grad_tol)
        jax.tree.map(close, grads, want_grads)


def _outputs_and_value_grad(net, obs, params):
    """``((logits, value), d sum(value) / d params)`` of ``net`` on ``obs``."""
    return net.apply(params, obs), jax.grad(lambda p: jnp.sum(net.apply(p, obs)[1]))(params)


@pytest.mark.parametrize("name", ["impala_resnet"])  # Nature's convs: the layer test above
def test_image_network_conv_forms_agree(name, image_params):
    """The GEMM and XLA forms of a whole image network take the same params (those of the
    ``nn.Conv`` networks: same names and shapes) and give the same outputs and gradients to
    float roundoff."""
    params = image_params(name)
    obs = np.random.default_rng(0).integers(0, 256, size=(N, *_IMAGE.obs_shape)).astype(np.uint8)
    out = {}
    for form in ("gemm", "xla"):
        net = networks.NETWORKS[name](num_actions=_IMAGE.num_actions, conv_form=form)
        assert (jax.tree.map(np.shape, jax.eval_shape(net.init, jax.random.key(0), obs[:1]))
                == jax.tree.map(np.shape, params))
        out[form] = jax.jit(functools.partial(_outputs_and_value_grad, net, obs))(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                 out["gemm"], out["xla"])


def test_image_network_param_names_are_the_nn_conv_ones():
    """Checkpoints of the ``nn.Conv`` networks load: the same module and param names."""
    def names(net):
        params = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, 4, 84, 84), jnp.uint8))
        return {jax.tree_util.keystr(p) for p, _ in
                jax.tree_util.tree_leaves_with_path(params["params"])}

    dense = {f"['{m}']['{p}']" for m in ("Dense_0",) for p in ("kernel", "bias")} | {
        f"['_Heads_0']['{h}']['{p}']" for h in ("policy", "value") for p in ("kernel", "bias")}
    conv = lambda *path: {"".join(f"['{m}']" for m in path) + f"['{p}']"
                          for p in ("kernel", "bias")}
    nature = set().union(*(conv(f"Conv_{i}") for i in range(3)))
    assert names(networks.NatureCNN(num_actions=6)) == nature | dense
    impala = nature | set().union(*(conv(f"_ResidualBlock_{i}", f"Conv_{j}")
                                    for i in range(6) for j in range(2)))
    assert names(networks.ImpalaResNet(num_actions=6)) == impala | dense
