"""gymnax's registered env ids, written out so that checking an env id never imports gymnax.

Importing gymnax imports every one of its envs and with them seaborn, scipy and matplotlib:
about 2.4 s of the 4 s a command takes to refuse a bad config. The list is gymnax's
``registered_envs`` (gymnax 1.0.1), in its order; ``tests/envs/test_env_registry.py``
compares the two, so a gymnax that adds or drops an id fails that test rather than going
unnoticed.
"""

from __future__ import annotations

REGISTERED_IDS = (
    "CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0",
    "Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar", "Catch-bsuite", "DeepSea-bsuite", "MemoryChain-bsuite",
    "UmbrellaChain-bsuite", "DiscountingChain-bsuite", "MNISTBandit-bsuite",
    "SimpleBandit-bsuite", "FourRooms-misc", "MetaMaze-misc", "PointRobot-misc",
    "BernoulliBandit-misc", "GaussianBandit-misc", "Reacher-misc", "Swimmer-misc", "Pong-misc",
    "FrozenLake-misc",
)

# Ids with a continuous (Box) action space; every other registered id is discrete. Kept as a
# list so listing ids never constructs an env (MNISTBandit-bsuite downloads MNIST).
CONTINUOUS_GYMNAX_IDS = frozenset(
    {"Pendulum-v1", "MountainCarContinuous-v0", "PointRobot-misc", "Reacher-misc", "Swimmer-misc"}
)


def discrete_gymnax_ids() -> list[str]:
    """Registered gymnax ids with discrete actions, in gymnax's order."""
    return [i for i in REGISTERED_IDS if i not in CONTINUOUS_GYMNAX_IDS]


def jax_gymnax_ids() -> list[str]:
    """The gymnax ids the adapter runs: the discrete ones, then ``Pendulum-v1`` and
    ``MountainCarContinuous-v0`` (the continuous ones checked here; the ``-misc`` boxes are
    not)."""
    return discrete_gymnax_ids() + ["Pendulum-v1", "MountainCarContinuous-v0"]
