"""The one exception type a bad config raises (no imports of ours, so any layer can raise it)."""


class ConfigError(ValueError):
    """A config field has a bad value. The message starts with the field name:
    ``ConfigError("num_envs: 25 envs do not split over 4 learner devices")``."""
