"""IMPALA's loss scale against a Cleanba-style summed loss, on one Atari minibatch.

``python -m benchmarks.impala_scale [--steps=20 --envs=32]`` builds a fresh IMPALA ResNet
(``impala_resnet``) and a minibatch of ``steps x envs`` Breakout-v5 steps (EnvPool, Atari
protocol, uniformly random actions, so the behaviour logits are uniform), then prints, for
our ``rlcore.losses.impala_loss``, for the loss Cleanba, TorchBeast and the IMPALA authors
differentiate (written out here with the V-trace of ``rlcore.returns``: ``sum(-pg_adv *
log pi) + vf_coef * 0.5 * sum((vs - V)^2) - ent_coef * sum(H)`` over time and batch) and for
the mean over time and batch that the loss was before: the gradient's global norm, the
share of gradient elements below RMSProp's eps 0.01, and the steady torch-RMSProp step
(lr 6e-4, eps 0.01, clip 40, once the second-moment average has settled on this gradient:
``lr * g / (|g| + eps)`` of the clipped ``g``) as a global norm. Ours and the Cleanba-style
sum must agree (within 10%).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.common import flag_checks, format_table
from rlcore import losses, returns
from rlcore.networks import make_network
from rlcore.types import EnvSpec, Trajectory
from runtime.config.fields import POSITIVE
from runtime.process.arguments import OneLineParser, doc_summary

ATARI = EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8", num_actions=18)  # full action set
HP = dict(discount=0.99, vf_coef=0.5, ent_coef=0.01)  # Cleanba's IMPALA
RMSPROP = dict(learning_rate=6e-4, decay=0.99, eps=0.01, max_grad_norm=40.0)


def minibatch(steps: int, envs: int, seed: int = 0, warmup: int = 50) -> Trajectory:
    """``steps`` Breakout-v5 steps of ``envs`` envs under uniformly random actions, after
    ``warmup`` steps (so the frame stacks are full)."""
    from sebulba.host_envs import make_host_env

    env = make_host_env("Breakout-v5", envs, seed=seed)
    rng = np.random.default_rng(seed)
    try:
        ts = env.reset()
        for _ in range(warmup):
            ts = env.step(rng.integers(0, env.spec.num_actions, envs))
        obs, act, rew, term, trunc = [], [], [], [], []
        for _ in range(steps):
            a = rng.integers(0, env.spec.num_actions, envs)
            obs.append(ts.obs)
            ts = env.step(a)
            act.append(a), rew.append(ts.reward), term.append(ts.terminated)
            trunc.append(ts.truncated)
    finally:
        env.close()
    return Trajectory(
        obs=jnp.asarray(np.stack(obs)), action=jnp.asarray(np.stack(act), jnp.int32),
        reward=jnp.asarray(np.stack(rew), jnp.float32),
        terminated=jnp.asarray(np.stack(term)), truncated=jnp.asarray(np.stack(trunc)),
        behaviour_dist_params=jnp.zeros((steps, envs, env.spec.num_actions), jnp.float32),
        behaviour_value=None, bootstrap_obs=jnp.asarray(ts.obs))


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
    mu_log_pa = jnp.take_along_axis(jax.nn.log_softmax(traj.behaviour_dist_params),
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
    """Global norm, share of elements below RMSProp's eps, steady RMSProp step's norm."""
    flat = np.concatenate([np.abs(np.asarray(x)).ravel() for x in jax.tree.leaves(grads)])
    norm = float(optax.global_norm(grads))
    scale = min(1.0, RMSPROP["max_grad_norm"] / norm)
    step = jax.tree.map(lambda g: RMSPROP["learning_rate"] * scale * g
                        / (jnp.abs(scale * g) + RMSPROP["eps"]), grads)
    return {"grad norm": norm, "elements < eps": float(np.mean(flat < RMSPROP["eps"])),
            "RMSProp step norm": float(optax.global_norm(step))}


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m benchmarks.impala_scale", description=doc_summary(__doc__),
                      check=flag_checks({"steps": POSITIVE, "envs": POSITIVE}))
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
    print(f"IMPALA ResNet, fresh init, {args.steps} x {args.envs} Breakout-v5 steps of random "
          "actions; steady RMSProp step: lr 6e-4, eps 0.01, clip 40")
    print(format_table(["loss", "grad norm", "grad elements < eps", "RMSProp step norm"],
                       rows))
    a, b = figures(ours), figures(ref)
    ratio = a["grad norm"] / b["grad norm"]
    print(f"ours / Cleanba-style grad norm: {ratio:.4f}; step norm: "
          f"{a['RMSProp step norm'] / b['RMSProp step norm']:.4f}")


if __name__ == "__main__":
    main()
