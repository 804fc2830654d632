"""Actor-critic networks: ``obs -> (dist, value)``, ``dist`` an action distribution of
``rlcore.distributions`` (the family the network was built with: ``make_network`` takes it
from the env's action space).

- ``MLPActorCritic``: separate 2x64 tanh actor and critic, orthogonal init (sqrt 2 hidden,
  0.01 policy head, 1.0 value head), as in PureJaxRL / CleanRL.
- ``NatureCNN``: Mnih et al. 2015 torso (32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512).
- ``ImpalaResNet``: Espeholt et al. 2018 torso, channels 16/32/32, each stage conv 3x3,
  max-pool 3x3 stride 2 and two residual blocks, then dense 256.
- ``MinAtarCNN``: the MinAtar network (Young & Tian 2019, arXiv 1903.03176): one 16x3x3
  stride-1 VALID conv (a dense layer over 3x3 ``patches``) over the ``[H, W, C]``
  object-channel grid, then dense 128, ReLU. MinAtar frames are 10x10 binary grids, one
  channel per object kind; one small conv sees each cell's neighbourhood (ball next to
  brick or paddle) with weights shared across the grid, where a flattened MLP has to learn
  every position apart.

Image networks take uint8 frame stacks ``[N, C, H, W]`` (EnvPool layout), scale to [0, 1]
and move channels last. Their convolutions are ``Conv``: ``nn.Conv``'s params, init and
function, computed by XLA's convolution or (``conv_form="gemm"``) as one GEMM over
``patches``. All take a batch ``[N, *obs_shape]`` and return ``dist`` (batch ``[N]``) and
``value`` ``[N]``. The policy head is one dense layer ``policy`` (A logits, or the D means of
a Gaussian, whose state-independent log-std is the network's parameter ``log_std [D]``).

Your own torso (``network=PACKAGE.MODULE:NAME``, docs/extending.md, "Your own network"): a
flax module ``obs [N, *obs_shape] -> features [N, D]``; ``TorsoActorCritic`` gives it the
same policy and value heads, and a recurrent agent takes it as its torso.

Recurrent agents (``make_network(..., recurrent="lstm" | "gru")``): any of these torsos
(without its heads), then an LSTM or GRU cell (flax's ``OptimizedLSTMCell`` / ``GRUCell``),
then the policy and value heads: ``RecurrentActorCritic``, a sequence in and a sequence out,
``(obs [T, N, ...], core [N, H], first [T, N]) -> (dist [T, N], value [T, N], core
[N, H])``. The core restarts from zeros (not a learned state) at the first step of every
episode, inside the step. ``step_network`` (one acting step, carry in and carry out) and
``unroll_network`` (a whole sequence, in the losses) are the two ways the modes and losses
call any network, feed-forward or recurrent: a None core state means feed-forward.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from rlcore.distributions import Categorical, DiagGaussian, Distribution, distribution_for
from rlcore.errors import ConfigError
from rlcore.imports import load_object, refusal
from rlcore.types import ApplyFn, Array, CoreState, EnvSpec, Network, Params, PRNGKey


def _ortho(scale: float) -> nn.initializers.Initializer:
    """Orthogonal initializer of gain ``scale``."""
    return nn.initializers.orthogonal(scale)


def policy_head(module: Any, h: Array) -> Distribution:
    """The policy head of ``module`` (inside its compact call; it has ``num_actions`` and
    ``distribution``): dense ``policy`` on ``h [N, F]``, orthogonal init 0.01, made into
    the distribution (batch ``[N]``)."""
    out = nn.Dense(module.num_actions, kernel_init=_ortho(0.01), name="policy")(h)
    return module.distribution.from_head(module, out)


class _Heads(nn.Module):
    """Policy and value heads on a shared torso output ``[N, F]``."""

    num_actions: int
    distribution: Any = Categorical  # a class of rlcore.distributions

    @nn.compact
    def __call__(self, h: Array) -> tuple[Distribution, Array]:
        dist = policy_head(self, h)
        value = nn.Dense(1, kernel_init=_ortho(1.0), name="value")(h)
        return dist, value[..., 0]


class QHead(nn.Module):
    """Q-value heads of value-based algorithms (``Algorithm.heads``): ``features [N, F] ->
    (Categorical(logits=Q) [N], max_a Q [N])``, one dense layer ``q`` of ``num_actions``
    outputs. The Q-values ride in the categorical's logits, whose mode is the greedy action
    (evaluation's and ``load_policy``'s); the value is the greedy one."""

    num_actions: int

    @nn.compact
    def __call__(self, h: Array) -> tuple[Categorical, Array]:
        q = nn.Dense(self.num_actions, name="q")(h)
        return Categorical(logits=q), jnp.max(q, axis=-1)


class MLPActorCritic(nn.Module):
    """Separate tanh MLP actor and critic. ``obs [N, ...] -> (dist [N], value [N])``."""

    num_actions: int
    distribution: Any = Categorical  # a class of rlcore.distributions
    hidden: Sequence[int] = (64, 64)
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    layer_norm: bool = False  # LayerNorm before each hidden activation (``normed``)
    takes_frames: ClassVar[bool] = False  # any observation shape, flattened

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Distribution, Array] | Array:
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        a, v = x, x
        for i, width in enumerate(self.hidden):
            a = nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"actor_{i}")(a)
            a = nn.tanh(normed(self, a, f"actor_norm_{i}"))
            if not self.heads:  # one shared stream (the actor's) feeds the recurrent core
                continue
            v = nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"critic_{i}")(v)
            v = nn.tanh(normed(self, v, f"critic_norm_{i}"))
        if not self.heads:
            return a
        dist = policy_head(self, a)
        value = nn.Dense(1, kernel_init=_ortho(1.0), name="value")(v)
        return dist, value[..., 0]


def normed(module: Any, x: Array, name: str) -> Array:
    """``x`` through a LayerNorm named ``name`` (over the last axis: a conv's channels)
    where ``module.layer_norm`` (the config's ``layer_norm``: PQN's networks, Gallici et al.
    2024), else ``x``; inside ``module``'s compact call."""
    return nn.LayerNorm(name=name)(x) if module.layer_norm else x


def _frames_nhwc(obs: Array) -> Array:
    """uint8 ``[N, C, H, W]`` -> float32 ``[N, H, W, C]`` in [0, 1]."""
    return jnp.transpose(obs.astype(jnp.float32) / 255.0, (0, 2, 3, 1))


def patches(x: Array, kh: int, kw: int, stride: int = 1) -> Array:
    """Every ``kh x kw`` window of ``x`` at ``stride`` (VALID), as channels.

    Args:
      x: ``[N, H, W, C]``.
      kh, kw: window height and width.
      stride: step between windows, both axes.

    Returns:
      ``[N, OH, OW, kh * kw * C]`` with ``OH = (H - kh) // stride + 1`` (``OW`` alike), in
      (dy, dx, c) order: ``kernel.reshape(kh * kw * C, F)`` of a ``[kh, kw, C, F]`` conv
      kernel multiplies it into the convolution.
    """
    n, h, w, c = x.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    return jnp.concatenate(
        [jax.lax.slice(x, (0, dy, dx, 0), (n, dy + stride * (oh - 1) + 1,
                                           dx + stride * (ow - 1) + 1, c), (1, stride, stride, 1))
         for dy in range(kh) for dx in range(kw)], axis=-1)


def same_pads(size: int, k: int, stride: int) -> tuple[int, int]:
    """``(before, after)`` zero padding of a SAME conv/pool along an axis of ``size`` (XLA's
    rule: output ``ceil(size / stride)``, the odd one after)."""
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


# ``Conv``'s forms: "xla" (``lax.conv_general_dilated``, as ``nn.Conv``) or "gemm" (one GEMM
# over ``patches``).
CONV_FORMS = ("xla", "gemm")


class Conv(nn.Module):
    """2-D convolution ``[N, H, W, C] -> [N, OH, OW, features]`` with ``nn.Conv``'s params
    (``kernel [kh, kw, C, features]``, ``bias [features]``), init and function.

    ``form="xla"`` (the default): ``lax.conv_general_dilated``, bitwise ``nn.Conv``.
    ``form="gemm"``: one GEMM of ``patches`` (zero-padded first for SAME) with the kernel
    reshaped to ``[kh * kw * C, features]``, the same function up to float roundoff. On CPU
    (2 cores, loaded host; benchmarks/conv_forms.py, IMPALA ResNet PPO update, 4 envs x 8
    steps) XLA's convolution ran 11.5x slower in a rolled ``lax.scan`` than unrolled (39.7 s
    vs 3.4 s), the GEMM about alike (7.3 s rolled, 5.6 s unrolled), so the unrolled XLA
    convolution is the fastest and stays the default (with XLA CPU's concurrency-optimized
    scheduler off an unrolled update is as lean as a rolled one: runtime/config/memory.py); the GEMM
    is for conv nets that must run in rolled loops. Checkpoints do not depend on the form.
    """

    features: int
    kernel_size: tuple[int, int]
    strides: int = 1
    padding: str = "VALID"  # or "SAME"
    kernel_init: Callable[..., Any] = nn.initializers.lecun_normal()  # nn.Conv's default
    form: str = "xla"  # one of CONV_FORMS

    @nn.compact
    def __call__(self, x: Array) -> Array:
        kh, kw = self.kernel_size
        kernel = self.param("kernel", self.kernel_init, (kh, kw, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
        bias = bias.reshape((1, 1, 1, self.features))
        if self.form not in CONV_FORMS:
            raise ValueError(f"Conv form {self.form!r}: expected one of {CONV_FORMS}")
        if self.form == "xla":
            y = jax.lax.conv_general_dilated(x, kernel, (self.strides, self.strides),
                                             self.padding,
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return y + bias
        if self.padding == "SAME":
            pads = (same_pads(x.shape[1], kh, self.strides),
                    same_pads(x.shape[2], kw, self.strides))
            x = jnp.pad(x, ((0, 0), *pads, (0, 0)))
        cols = patches(x, kh, kw, self.strides)  # [N, OH, OW, kh * kw * C]
        return cols @ kernel.reshape(-1, self.features) + bias


def dense_and_heads(module: Any, x: Array, width: int) -> tuple[Distribution, Array] | Array:
    """The end of a conv torso, inside ``module``'s compact call (it has ``num_actions``,
    ``distribution`` and ``heads``): ``x [N, ...]`` flattened, a dense ReLU layer of
    ``width`` (orthogonal init sqrt 2), then the policy and value heads (``dist [N]``,
    ``value [N]``), or with ``heads`` False the features ``[N, width]``."""
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(normed(module, nn.Dense(width, kernel_init=_ortho(np.sqrt(2)))(x), "dense_norm"))
    return _Heads(module.num_actions, module.distribution)(x) if module.heads else x


class _FrameNet(nn.Module):
    """The fields of the networks on uint8 frame stacks ``obs [N, C, H, W]``."""

    num_actions: int
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    conv_form: str = "xla"  # Conv.form
    distribution: Any = Categorical  # a class of rlcore.distributions
    layer_norm: bool = False  # LayerNorm before each ReLU of the torso (``normed``)
    takes_frames: ClassVar[bool] = True  # uint8 [C, H, W] frame stacks only


class NatureCNN(_FrameNet):
    """Nature DQN torso with actor-critic heads. ``obs uint8 [N, C, H, W]``."""

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Distribution, Array] | Array:
        x = _frames_nhwc(obs)
        for i, (feat, k, s) in enumerate(((32, 8, 4), (64, 4, 2), (64, 3, 1))):
            x = Conv(feat, (k, k), s, kernel_init=_ortho(np.sqrt(2)), form=self.conv_form,
                     name=f"Conv_{i}")(x)
            x = nn.relu(normed(self, x, f"conv_norm_{i}"))
        return dense_and_heads(self, x, 512)


class _ResidualBlock(nn.Module):
    channels: int
    conv_form: str = "xla"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        conv = lambda i: Conv(self.channels, (3, 3), padding="SAME", form=self.conv_form,
                              name=f"Conv_{i}")
        y = conv(0)(nn.relu(x))
        y = conv(1)(nn.relu(y))
        return x + y


class ImpalaResNet(_FrameNet):
    """IMPALA ResNet torso (16/32/32) with actor-critic heads. ``obs uint8 [N, C, H, W]``."""

    channels: Sequence[int] = (16, 32, 32)
    dense: int = 256

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Distribution, Array] | Array:
        x = _frames_nhwc(obs)
        for i, ch in enumerate(self.channels):
            x = Conv(ch, (3, 3), padding="SAME", form=self.conv_form, name=f"Conv_{i}")(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = _ResidualBlock(ch, self.conv_form, name=f"_ResidualBlock_{2 * i}")(x)
            x = _ResidualBlock(ch, self.conv_form, name=f"_ResidualBlock_{2 * i + 1}")(x)
        return dense_and_heads(self, nn.relu(x), self.dense)


class MinAtarCNN(nn.Module):
    """MinAtar conv torso with actor-critic heads. ``obs [N, H, W, C]`` (any dtype)."""

    num_actions: int
    features: int = 16
    dense: int = 128
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    distribution: Any = Categorical  # a class of rlcore.distributions
    layer_norm: bool = False  # LayerNorm before each ReLU (``normed``)
    takes_frames: ClassVar[bool] = False
    obs_ndim: ClassVar[int] = 3  # [H, W, C] grids (gymnax MinAtar layout)

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Distribution, Array] | Array:
        x = patches(obs.astype(jnp.float32), 3, 3)  # [N, H-2, W-2, 9C]
        # The 3x3 VALID conv as a dense layer over the patches (Conv's GEMM form, its kernel
        # kept flat [9C, F] as in the first checkpoints). XLA on CPU runs this 16-channel
        # conv (and its gradient) inside the rollout and update loops far slower.
        x = nn.Dense(self.features, kernel_init=_ortho(np.sqrt(2)), name="conv")(x)
        x = nn.relu(normed(self, x, "conv_norm"))
        return dense_and_heads(self, x, self.dense)


# name -> module class; the config's ``network`` choices.
NETWORKS = {"mlp": MLPActorCritic, "nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet,
            "minatar_cnn": MinAtarCNN}
# Networks that need uint8 [C, H, W] frames (validation refuses them for other envs).
IMAGE_NETWORKS = tuple(name for name, cls in NETWORKS.items() if cls.takes_frames)


NO_CORE = "none"
# The config's ``recurrent`` choices: no core, or the cell after the torso.
CORES = (NO_CORE, "lstm", "gru")


class _ResetCell(nn.Module):
    """One step of an LSTM or GRU cell whose state restarts from zeros where ``first``:
    ``(core CoreState [N, H], x [N, D], first [N]) -> (core [N, H], y [N, H])``."""

    cell: str
    hidden_size: int

    @nn.compact
    def __call__(self, core: CoreState, x: Array, first: Array) -> tuple[CoreState, Array]:
        core = jax.tree.map(lambda s: jnp.where(first[:, None], jnp.zeros_like(s), s), core)
        if self.cell == "lstm":
            (c, h), y = nn.OptimizedLSTMCell(self.hidden_size, name="lstm")((core.c, core.h), x)
            return CoreState(h=h, c=c), y
        h, y = nn.GRUCell(self.hidden_size, name="gru")(core.h, x)
        return CoreState(h=h), y


class RecurrentActorCritic(nn.Module):
    """A torso, an LSTM or GRU core and the policy and value heads, over whole sequences.

    ``(obs [T, N, *obs_shape], core CoreState [N, H], first [T, N] bool) -> (dist
    [T, N], value [T, N], core [N, H])``: the torso runs on all ``T * N`` observations at
    once, the cell is scanned along time (its state set to zeros before step ``t`` where
    ``first[t]``), the heads run on all outputs at once. One acting step is ``T = 1``
    (``step_network``).

    Attributes:
      torso: a network of ``NETWORKS`` built with ``heads=False``: ``[N, ...] -> [N, D]``.
      num_actions: A (or D).
      cell: ``"lstm"`` or ``"gru"``.
      hidden_size: H.
      distribution: the head's class of ``rlcore.distributions``.
      heads: an algorithm's own heads (``Algorithm.heads``: ``[N, H] -> (dist [N], value
        [N])``), or None for the policy and value heads.
    """

    torso: nn.Module
    num_actions: int
    cell: str
    hidden_size: int
    distribution: Any = Categorical
    heads: nn.Module | None = None

    @nn.compact
    def __call__(self, obs: Array, core: CoreState,
                 first: Array) -> tuple[Distribution, Array, CoreState]:
        t, n = obs.shape[:2]
        x = self.torso(obs.reshape((t * n,) + obs.shape[2:]))
        scan = nn.scan(_ResetCell, variable_broadcast="params", split_rngs={"params": False})
        core, y = scan(self.cell, self.hidden_size, name="core")(
            core, x.reshape((t, n, x.shape[-1])), first)
        dist, value = _heads_of(self)(y.reshape((t * n, -1)))
        return _split_rows(dist, t, n), value.reshape((t, n)), core

    def initial_core(self, n: int) -> CoreState:
        """The zero state of ``n`` envs: leaves ``[n, H]`` float32."""
        zeros = jnp.zeros((n, self.hidden_size), jnp.float32)
        return CoreState(h=zeros, c=zeros if self.cell == "lstm" else None)


def _split_rows(tree: Any, t: int, n: int) -> Any:
    """Leaves ``[t * n, ...] -> [t, n, ...]`` (a distribution or an array)."""
    return jax.tree.map(lambda x: x.reshape((t, n) + x.shape[1:]), tree)


def _heads_of(module: Any) -> nn.Module:
    """``module``'s heads (inside its compact call): its ``heads`` (an algorithm's own,
    ``Algorithm.heads``), else the policy and value heads; named ``heads`` either way."""
    if module.heads is not None:
        return module.heads
    return _Heads(module.num_actions, module.distribution, name="heads")


class TorsoActorCritic(nn.Module):
    """A torso with heads: ``obs [N, ...] -> (dist [N], value [N])``.

    Attributes:
      torso: ``obs [N, *obs_shape] -> features [N, D]`` float (the user's, or a network of
        ``NETWORKS`` built with ``heads=False``).
      num_actions: A (or D).
      distribution: the head's class of ``rlcore.distributions``.
      heads: an algorithm's own heads (``Algorithm.heads``), or None for the policy and
        value heads.
    """

    torso: nn.Module
    num_actions: int
    distribution: Any = Categorical
    heads: nn.Module | None = None

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Distribution, Array]:
        return _heads_of(self)(self.torso(obs))


def imported_torso(path: str, spec: EnvSpec) -> nn.Module:
    """The torso that import path ``path`` names (docs/extending.md, "Your own network"): a
    flax ``nn.Module`` subclass (built with no arguments), a module object, or a function
    ``f(spec: EnvSpec) -> nn.Module``.

    Raises:
      ConfigError: ``rlcore.imports.load_object``'s, or it gives no flax module.
    """
    target = load_object(path, "network")
    if inspect.isclass(target) and issubclass(target, nn.Module):
        target = _called(path, target)
    elif callable(target) and not isinstance(target, nn.Module):
        target = _called(path, target, spec)
    if not isinstance(target, nn.Module):
        raise ConfigError(f"network: '{path}' gives an object of type {type(target).__name__}, "
                          "not a flax module: name an nn.Module class, a module, or a "
                          "function of the env's spec that returns one")
    return target


def _called(path: str, target: Any, *args: Any) -> Any:
    try:
        return target(*args)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        given = "the env's spec" if args else "no arguments"
        raise refusal(f"network: '{path}' could not be built with {given}", e) from None


def check_torso(path: str, spec: EnvSpec) -> None:
    """Traces the torso of ``path`` on a batch of 2 of ``spec``'s observations
    (``jax.eval_shape``: nothing runs or compiles): it must give float features ``[2, D]``.

    Raises:
      ConfigError: ``imported_torso``'s, the trace's own error, or another output.
    """
    torso = imported_torso(path, spec)
    obs = jax.ShapeDtypeStruct((2, *spec.obs_shape), spec.obs_dtype)
    try:
        out = jax.eval_shape(lambda o: torso.apply(torso.init(jax.random.key(0), o), o), obs)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise refusal(f"network: '{path}' does not trace on observations "
                      f"{spec.obs_dtype} [N, {', '.join(map(str, spec.obs_shape))}]", e) from None
    if gives_heads(out):
        return
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != 2 or not jnp.issubdtype(
            out.dtype, jnp.floating):
        got = f"{out.dtype} {list(shape)}" if shape is not None else type(out).__name__
        raise ConfigError(f"network: '{path}' gives {got} for 2 observations; a torso gives "
                          "float features [N, D], a whole network (dist [N], value [N])")


def gives_heads(out: Any) -> bool:
    """Whether a network's output (arrays or shapes) is a whole network's: ``(dist,
    value)``, a distribution of ``rlcore.distributions`` and values ``[N]``, rather than a
    torso's features."""
    return (isinstance(out, tuple) and len(out) == 2
            and isinstance(out[0], (Categorical, DiagGaussian))
            and len(getattr(out[1], "shape", ())) == 1)


def is_whole_network(module: nn.Module, spec: EnvSpec) -> bool:
    """Whether ``module`` (a user's, by import path) is a whole network with its own heads,
    ``obs [N, ...] -> (dist [N], value [N])`` (``gives_heads`` of its output on 2 of
    ``spec``'s observations, traced by ``jax.eval_shape``), used as it is; otherwise a
    torso."""
    obs = jax.ShapeDtypeStruct((2, *spec.obs_shape), spec.obs_dtype)
    out = jax.eval_shape(lambda o: module.apply(module.init(jax.random.key(0), o), o), obs)
    return gives_heads(out)


def torso(name: str, spec: EnvSpec, layer_norm: bool = False) -> nn.Module:
    """The torso of network ``name``: a key of ``NETWORKS`` (built without heads; with
    ``layer_norm``, its LayerNorms) or an import path (``imported_torso``: the user's own,
    ``layer_norm`` is not its option)."""
    if name in NETWORKS:
        return NETWORKS[name](num_actions=spec.num_actions, heads=False, layer_norm=layer_norm)
    return imported_torso(name, spec)


def make_network(name: str, spec: EnvSpec, recurrent: str = NO_CORE,
                 hidden_size: int = 128, heads: nn.Module | None = None,
                 layer_norm: bool = False) -> nn.Module:
    """Returns the network ``name`` (a key of ``NETWORKS``, or an import path to a torso of
    the user's, given the heads by ``TorsoActorCritic``) for ``spec``'s action space (its
    distribution: ``rlcore.distributions.distribution_for``); with ``recurrent`` ``"lstm"``
    or ``"gru"`` that network's torso in a ``RecurrentActorCritic`` whose core has
    ``hidden_size`` units. ``heads``: an algorithm's own (``Algorithm.heads``) on the
    torso of ``name`` instead of the policy and value heads. A feed-forward network of the
    user's that gives ``(dist, value)`` itself (``is_whole_network``) is taken as it is,
    its own heads instead of either. ``layer_norm``: a built-in network's LayerNorms
    (``normed``; the config's ``layer_norm``)."""
    dist = distribution_for(spec)
    if recurrent == NO_CORE and name in NETWORKS and heads is None:
        return NETWORKS[name](num_actions=spec.num_actions, distribution=dist,
                              layer_norm=layer_norm)
    if recurrent == NO_CORE:
        body = torso(name, spec, layer_norm)
        if name not in NETWORKS and is_whole_network(body, spec):
            return body  # the user's whole network, heads included
        return TorsoActorCritic(torso=body, num_actions=spec.num_actions,
                                distribution=dist, heads=heads)
    return RecurrentActorCritic(torso=torso(name, spec, layer_norm), num_actions=spec.num_actions,
                                cell=recurrent, hidden_size=hidden_size, distribution=dist,
                                heads=heads)


def initial_core(network: Network, n: int) -> CoreState | None:
    """The core state a recurrent ``network`` starts ``n`` envs from (zeros ``[n, H]``);
    None for a feed-forward one."""
    initial = getattr(network, "initial_core", None)  # RecurrentActorCritic, Normalized
    return None if initial is None else initial(n)


def init_params(network: Network, key: PRNGKey, spec: EnvSpec) -> Params:
    """``network.init`` on one dummy observation of ``spec`` (a sequence of one step for a
    recurrent network)."""
    dummy = jnp.zeros((1,) + tuple(spec.obs_shape), jnp.dtype(spec.obs_dtype))
    core = initial_core(network, 1)
    if core is None:
        return network.init(key, dummy)
    return network.init(key, dummy[None], core, jnp.ones((1, 1), bool))


def step_network(apply_fn: ApplyFn, params: Params, obs: Array, core: CoreState | None,
                 first: Array | None) -> tuple[Distribution, Array, CoreState | None]:
    """One acting step of a feed-forward (``core`` None) or recurrent network.

    Args:
      apply_fn: the network's ``apply``.
      params: its parameters.
      obs: ``[N, *obs_shape]``.
      core: CoreState ``[N, H]`` before this step, or None (feed-forward).
      first: ``[N]`` bool, ``obs`` starts an episode (unused, may be None, when feed-forward).

    Returns:
      ``(dist [N], value [N], core [N, H] or None)``, the core after this step.
    """
    if core is None:
        dist, value = apply_fn(params, obs)
        return dist, value, None
    if first is None:
        raise ValueError("step_network: a recurrent step needs its episode starts, first")
    dist, value, core = apply_fn(params, obs[None], core, first[None])
    return jax.tree.map(lambda x: x[0], dist), value[0], core


def final_values(apply_fn: ApplyFn, params: Params, final_obs: Array, truncated: Array,
                 core: CoreState | None) -> Array:
    """Values of the episodes' final observations where ``truncated``, 0 elsewhere: the
    ``Trajectory.final_value`` of one step (``rlcore.returns.step_inputs``).

    A recurrent agent values the final observation from a fresh core (``first = True``), as
    an episode's first observation: that is the value the learner trains at every episode
    start. The core continuing the episode (the state after the step's own observation)
    would see a step past the time limit, which no training target ever reaches: on the
    cycle env of tests/anakin/test_time_limits.py an LSTM's continuing-core value drifted
    there to 2.5 times the true values (and pulled every value up with it), while the fresh
    core's were right. The cost: where the value depends on memory (partial observations)
    the final observation is valued as if the episode started there.

    Args:
      apply_fn: the network's ``apply``.
      params: the params that acted in the step.
      final_obs: ``[N, *obs_shape]`` observations before the auto-reset.
      truncated: ``[N]`` bool.
      core: CoreState ``[N, H]`` (any state: reset here), or None (feed-forward).

    Returns:
      ``[N]`` float32.
    """
    first = None if core is None else jnp.ones(truncated.shape, bool)
    value = step_network(apply_fn, params, final_obs, core, first)[1]
    return jnp.where(truncated, value, 0.0).astype(jnp.float32)


# Rows per block of ``row_stable``: a multiple of every CPU SIMD width a float32 GEMM uses
# (AVX-512: 16 lanes, AVX2: 8, NEON/SSE: 4).
ROW_BLOCK = 16


def row_stable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(params, *rows)`` computed so that each row's result does not depend on how many
    rows come with it: the row arguments (pytrees of ``[N, ...]`` leaves, None allowed) are
    padded with zeros to a multiple of ``ROW_BLOCK`` rows, fenced by optimisation barriers
    (so XLA cannot slice the padding back off before the matmuls), and the outputs'
    ``[N_padded, ...]`` leaves are cut back to ``N``.

    Why: XLA's CPU GEMMs compute rows in SIMD packets and the leftover rows of a batch with
    another kernel, whose sums round differently: the same row's logits came out apart in
    a batch of 12 and one of 48, in every network here (MLP up to 1.2e-7, IMPALA ResNet up
    to 3.8e-6; docs/design.md, "Row-stable actors"). A Sebulba actor thread's batch is
    its share of the envs, so without this 1 and 2 actor threads trained on different
    logits. With every batch a multiple of the packet width the rows were bit-identical at
    every size and offset tried, under XLA's defaults and the tests' fast compiles. The
    cost: up to ``ROW_BLOCK - 1`` padding rows per call (none when ``N`` is a multiple of
    16).
    """

    def wrapped(params: Params, *rows: Any) -> Any:
        n = jax.tree.leaves(rows)[0].shape[0]
        pad = -n % ROW_BLOCK
        padded = jax.tree.map(
            lambda x: jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]), rows)
        out = jax.lax.optimization_barrier(fn(params, *jax.lax.optimization_barrier(padded)))
        return jax.tree.map(lambda x: x[:n], out)

    return wrapped


def unroll_network(apply_fn: ApplyFn, params: Params, obs: Array,
                   core: CoreState | None = None,
                   first: Array | None = None) -> tuple[Distribution, Array]:
    """A feed-forward or recurrent network over time-major observations.

    Args:
      apply_fn: the network's ``apply``.
      params: its parameters.
      obs: ``[T, N, *obs_shape]``.
      core: CoreState ``[N, H]`` before step 0, or None: feed-forward, every observation on
        its own (one batch of ``T * N``).
      first: ``[T, N]`` bool episode starts (recurrent only).

    Returns:
      ``(dist [T, N], value [T, N])``.
    """
    t, n = obs.shape[:2]
    if core is None:
        dist, value = apply_fn(params, obs.reshape((t * n,) + obs.shape[2:]))
        return _split_rows(dist, t, n), value.reshape((t, n))
    dist, value, _ = apply_fn(params, obs, core, first)
    return dist, value
