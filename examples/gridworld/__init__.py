"""A package of the user's own, outside podracer-rl: a gridworld env (``env``), a small
torso (``torso``) and Discovered Policy Optimisation (``dpo``), each named by import path
(docs/extending.md): ``--config.env_id=gridworld.env:GridWorld``,
``--config.network=gridworld.torso:GridTorso``, ``--config.algorithm=gridworld.dpo:DPO``."""
