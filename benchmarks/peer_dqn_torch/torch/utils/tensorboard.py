"""``torch.utils.tensorboard.SummaryWriter``: tensorboardX's."""

from tensorboardX import SummaryWriter  # noqa: F401
