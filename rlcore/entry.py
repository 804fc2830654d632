"""What both entry points share: flag parsing, validation first, then exit codes and a
summary.

Exit codes: 0 done, 1 runtime failure (traceback printed), 2 bad config (one line naming
the field), 130/143 after SIGINT/SIGTERM (the trainer checkpoints first).
"""

from __future__ import annotations

import re
import sys
import traceback

from absl import flags

from rlcore import distributed
from rlcore.config import ModeChecks, validate, validate_distributed
from rlcore.errors import ConfigError


def parse_flags(argv):
    """absl flags parser for ``app.run``: a bad ``--config`` file or override (wrong type,
    unknown field) becomes one ``config error: <field>: ...`` line and exit code 2."""
    try:
        rest = flags.FLAGS(argv)
        flags.FLAGS["config"].value.to_dict()  # a config that failed to load raises here
        return rest
    except Exception as e:  # noqa: BLE001 - any parse failure is a bad config
        message = " ".join(str(e).split())
        found = re.search(r"--config\.([\w.]+)", message)
        field = found.group(1) if found else "config"
        if isinstance(e, AttributeError):  # ml_collections: override of an unknown field
            unknown = re.search(r"'(\w+)'", message)
            field, message = (unknown.group(1) if unknown else field), "no such config field"
        elif isinstance(e, OSError):  # the config file itself did not load
            message = message.split(" Attempted")[0]
        print(f"config error: {field}: {message}", file=sys.stderr)
        sys.exit(2)


def prepare(config, mode: ModeChecks) -> None:
    """Checks the process fields, joins the multi-process runtime, then checks every other
    field for ``mode``: all before anything compiles.

    Raises:
      ConfigError: ``"field: what is wrong"``.
    """
    validate_distributed(config)
    distributed.initialize(config)
    validate(config, mode, distributed.device_counts())


def run_main(config, workdir, mode: ModeChecks, train) -> None:
    """Runs ``prepare(config, mode)``, then ``train(config, workdir)``; exits with the code
    of the outcome."""
    try:
        prepare(config, mode)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        rows = train(config, workdir)
    except SystemExit:
        raise
    except ConfigError as e:  # found only at restore time (resuming with another config)
        print(f"config error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
    print_summary(rows)
    sys.exit(0)


def print_summary(rows) -> None:
    """A short learning-curve summary: return at a few points of the run."""
    points = [r for r in rows if r.get("episode_return") is not None]
    if not points:
        print("no episode finished", file=sys.stderr)
        return
    picks = sorted({0, len(points) // 4, len(points) // 2, 3 * len(points) // 4, len(points) - 1})
    print("learning curve (env steps -> mean episode return):")
    for i in picks:
        r = points[i]
        print(f"  {r['env_steps']:>12,} -> {r['episode_return']:8.1f}")
    best = max(p["episode_return"] for p in points)
    print(f"best logged mean return {best:.1f}; final {points[-1]['episode_return']:.1f}")
