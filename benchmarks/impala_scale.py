"""IMPALA's loss scale against a Cleanba-style summed loss, on one Atari minibatch.

``python -m benchmarks.impala_scale [--steps=20 --envs=32]`` builds a fresh IMPALA ResNet
(``impala_resnet``) on the Atari spec (4 x 84 x 84 uint8 frames, 18 actions) and a
minibatch of ``steps x envs`` random frames, actions, rewards and behaviour logits (a
uniform behaviour policy), then prints, for our ``rlcore.losses.impala_loss`` and for the
loss Cleanba, TorchBeast and the IMPALA authors differentiate (written out here with the
V-trace of ``rlcore.returns``: ``sum(-pg_adv * log pi) + vf_coef * 0.5 * sum((vs - V)^2) -
ent_coef * sum(H)`` over time and batch): the gradient's global norm, the share of gradient
elements below RMSProp's eps 0.01, and the first torch-RMSProp step (lr 6e-4, decay 0.99,
eps 0.01, clip 40) as a global norm. The two must agree (within 10%).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.common import format_table
from rlcore import losses, optim, returns
from rlcore.networks import make_network
from rlcore.types import EnvSpec, Trajectory
from runtime.cli import OneLineParser

ATARI = EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8", num_actions=18)
HP = dict(discount=0.99, vf_coef=0.5, ent_coef=0.01)  # Cleanba's IMPALA
RMSPROP = dict(learning_rate=6e-4, decay=0.99, eps=0.01, max_grad_norm=40.0)


def minibatch(steps: int, envs: int, seed: int = 0) -> Trajectory:
    """Random frames and actions under a uniform behaviour policy; a few episode ends."""
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 256, size=(steps + 1, envs, *ATARI.obs_shape), dtype=np.uint8)
    return Trajectory(
        obs=jnp.asarray(obs[:steps]),
        action=jnp.asarray(rng.integers(0, ATARI.num_actions, (steps, envs)), jnp.int32),
        reward=jnp.asarray(rng.choice([0.0, 1.0], (steps, envs), p=[0.9, 0.1]), jnp.float32),
        terminated=jnp.asarray(rng.random((steps, envs)) < 0.01),
        truncated=jnp.zeros((steps, envs), bool),
        behaviour_logits=jnp.zeros((steps, envs, ATARI.num_actions), jnp.float32),
        behaviour_value=None,
        bootstrap_obs=jnp.asarray(obs[steps]),
    )


def cleanba_style_loss(params, apply_fn, traj: Trajectory):
    """The references' IMPALA loss: V-trace (rho, pg-rho clipped at 1, lambda 1), then sums
    over time and batch of the policy-gradient, baseline (0.5 x squared error) and entropy
    terms. Written apart from ``impala_loss``: flattening, the terms and the reduction."""
    t, b = traj.action.shape
    obs = jnp.concatenate([traj.obs, traj.bootstrap_obs[None]]).reshape(
        ((t + 1) * b,) + traj.obs.shape[2:])
    logits, values = apply_fn(params, obs)
    logits = logits.reshape((t + 1, b, -1))[:t]
    values = values.reshape((t + 1, b))
    log_p = jax.nn.log_softmax(logits)
    log_pa = jnp.take_along_axis(log_p, traj.action[..., None], -1)[..., 0]
    mu_log_pa = jnp.take_along_axis(jax.nn.log_softmax(traj.behaviour_logits),
                                    traj.action[..., None], -1)[..., 0]
    discount = HP["discount"] * (1.0 - traj.terminated.astype(jnp.float32))
    v_tm1 = jax.lax.stop_gradient(values[:t])
    v_t = jax.lax.stop_gradient(values[1:])
    vt = returns.vtrace(v_tm1, v_t, traj.reward, discount,
                        jax.lax.stop_gradient(log_pa - mu_log_pa))
    pg = -jnp.sum(jax.lax.stop_gradient(vt.pg_advantages) * log_pa)
    baseline = 0.5 * jnp.sum(jnp.square(jax.lax.stop_gradient(vt.targets) - values[:t]))
    entropy = -jnp.sum(jnp.exp(log_p) * log_p)
    return pg + HP["vf_coef"] * baseline - HP["ent_coef"] * entropy


def figures(grads) -> dict[str, float]:
    """Global norm, share of elements below RMSProp's eps, first RMSProp step's norm."""
    leaves = jax.tree.leaves(grads)
    flat = np.concatenate([np.abs(np.asarray(x)).ravel() for x in leaves])
    opt = optim.make_optimizer("rmsprop", RMSPROP["learning_rate"],
                               max_grad_norm=RMSPROP["max_grad_norm"], num_updates=1,
                               steps_per_update=1, anneal_lr=False, adam_eps=1e-5,
                               rmsprop_decay=RMSPROP["decay"], rmsprop_eps=RMSPROP["eps"])
    params = jax.tree.map(jnp.zeros_like, grads)
    step, _ = opt.update(grads, opt.init(params), params)
    return {"grad norm": float(optax.global_norm(grads)),
            "elements < eps": float(np.mean(flat < RMSPROP["eps"])),
            "RMSProp step norm": float(optax.global_norm(step))}


def main(argv=None) -> None:
    p = OneLineParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="rollout length T (Cleanba: 20)")
    p.add_argument("--envs", type=int, default=32, help="envs of the minibatch")
    args = p.parse_args(argv)
    net = make_network("impala_resnet", ATARI)
    params = net.init(jax.random.key(0), jnp.zeros((1, *ATARI.obs_shape), jnp.uint8))
    traj = minibatch(args.steps, args.envs)
    ours = jax.grad(lambda q: losses.impala_loss(q, net.apply, traj, **HP)[0])(params)
    ref = jax.grad(lambda q: cleanba_style_loss(q, net.apply, traj))(params)
    mean = jax.tree.map(lambda g: g / (args.steps * args.envs), ours)  # the former mean loss
    rows = []
    for name, grads in (("ours (sum over T x B)", ours), ("Cleanba-style sum", ref),
                        ("mean over T x B (before)", mean)):
        f = figures(grads)
        rows.append([name, f"{f['grad norm']:.4g}", f"{f['elements < eps']:.1%}",
                     f"{f['RMSProp step norm']:.4g}"])
    print(f"IMPALA ResNet, fresh init, {args.steps} x {args.envs} random Atari samples; "
          "RMSProp lr 6e-4, decay 0.99, eps 0.01, clip 40")
    print(format_table(["loss", "grad norm", "grad elements < eps", "first RMSProp step norm"],
                       rows))
    a, b = figures(ours), figures(ref)
    ratio = a["grad norm"] / b["grad norm"]
    print(f"ours / Cleanba-style grad norm: {ratio:.4f}; step norm: "
          f"{a['RMSProp step norm'] / b['RMSProp step norm']:.4f}")


if __name__ == "__main__":
    main()
