"""Fields every config has, with typed defaults; other configs import and override them.

The defaults, with each field's meaning and the values it takes, are the records of
``runtime.config.fields`` (listed in docs/configuration.md); this file builds the config from them.
Every field can be overridden from the command line, e.g. ``--config.total_env_steps=1000000``
or ``--config.learner_device_ids=1,2,3`` (tuples, not lists).
"""

import ml_collections

from runtime.config.sweep import base_config


def get_config() -> ml_collections.ConfigDict:
    return base_config(env_id="CartPole-v1")  # the env ids belong to envs/ and configs/
