"""``torch.utils`` of the stand-in: its ``tensorboard``."""
