"""A stand-in for the few ``torch`` names CleanRL's ``dqn_jax.py`` and its replay buffer
(``cleanrl_utils/buffers.py``) touch, so that the reference runs in a venv without PyTorch
(this host reaches no PyTorch wheel index): ``tensor``/``as_tensor`` give NumPy arrays with
a ``numpy()`` method (the script calls ``.numpy()`` and ``.flatten()`` on the samples), a
CPU ``device``, ``cuda.is_available() -> False``; ``utils.tensorboard.SummaryWriter`` is
tensorboardX's. The buffer's own sampling (NumPy's generator) is CleanRL's, unchanged.
Used only by ``benchmarks/peer_dqn.py``, on the peer's ``PYTHONPATH``."""

from types import SimpleNamespace

import numpy as np


class Tensor(np.ndarray):
    """A NumPy array that answers ``numpy()`` as a torch tensor does."""

    def numpy(self):
        return np.asarray(self)


class device:  # noqa: N801 - torch's name
    """A device by name (``"cpu"``, ``"auto"``): always the CPU here."""

    def __init__(self, name="cpu"):
        self.type = "cpu" if name in ("auto", "cpu") else str(name).split(":")[0]


def tensor(array, device=None):
    return np.array(array).view(Tensor)


def as_tensor(array, device=None):
    return np.asarray(array).view(Tensor)


cuda = SimpleNamespace(is_available=lambda: False)
