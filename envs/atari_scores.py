"""Random-agent and human reference scores of the 57 Atari games; human-normalised scores.

HNS = (score - random) / (human - random): 0 is the uniform-random agent, 1 the human
tester. The table (``envs/data/atari_human_random.csv``, columns ``game,random,human``)
is the one of the Agent57 paper's appendix ("Table of scores", columns *Average Human* and
*Random*: Badia et al., "Agent57: Outperforming the Atari Human Benchmark", ICML 2020,
arXiv 2003.13350). The same numbers are used by MuZero, by rliable ("Deep RL at the Edge
of the Statistical Precipice", Agarwal et al. 2021) and by dopamine's and dqn_zoo's
normalisation code, with one exception: dqn_zoo (and the DQN Nature paper) give Video
Pinball a random score of 16256.9, where Agent57, MuZero and rliable give 0.0; this
table follows Agent57 (0.0), so its Video Pinball HNS is about 12x smaller than dqn_zoo's.
Scores were measured with up to 30 no-op starts and episodes capped at 108k frames.

Game names are EnvPool's Atari names without the version (``Breakout``,
``MontezumaRevenge``); ``game_name`` maps env ids such as ``envpool:Breakout-v5`` to them.
"""

from __future__ import annotations

import csv
import io
from importlib import resources

import numpy as np

_CSV = "atari_human_random.csv"
# EnvPool's Atari ids are "<Game>-v5" (the ALE v5 protocol: sticky actions, full action
# space); "ALE/" is Gymnasium's namespace for the same games.
_ATARI_SUFFIX = "-v5"
_ATARI_PREFIXES = ("envpool:", "ALE/")


def _parse_table(text: str) -> dict[str, tuple[float, float]]:
    """Parses ``game,random,human`` CSV text into ``{game: (random, human)}``.

    Raises:
      ValueError: wrong header, a duplicated game, or human not above random.
    """
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != ["game", "random", "human"]:
        raise ValueError(f"{_CSV}: header must be game,random,human, got {reader.fieldnames}")
    table: dict[str, tuple[float, float]] = {}
    for row in reader:
        game, random, human = row["game"], float(row["random"]), float(row["human"])
        if game in table:
            raise ValueError(f"{_CSV}: game {game} listed twice")
        if not human > random:
            raise ValueError(f"{_CSV}: {game}: human {human} is not above random {random}")
        table[game] = (random, human)
    return table


def _load_table() -> dict[str, tuple[float, float]]:
    """Reads the shipped CSV (works from a source tree, an install and a zip alike)."""
    text = resources.files("envs.data").joinpath(_CSV).read_text(encoding="utf-8")
    return _parse_table(text)


# game -> (random score, human score); 57 entries, in the CSV's (alphabetical) order.
REFERENCE: dict[str, tuple[float, float]] = _load_table()


def game_name(env_id: str) -> str | None:
    """The reference table's game name of an Atari env id; None for any other env.

    ``"Breakout-v5"``, ``"envpool:Breakout-v5"`` and ``"ALE/Breakout-v5"`` give
    ``"Breakout"``; ``"CartPole-v1"``, ``"Breakout-MinAtar"``, ``"gymnax:Breakout-MinAtar"``
    and Atari games outside the 57 (``"Tetris-v5"``) give None.

    Args:
      env_id: an env id as written in a config (bare or with a library prefix).

    Returns:
      The key of ``REFERENCE``, or None.
    """
    name = env_id
    for prefix in _ATARI_PREFIXES:
        name = name.removeprefix(prefix)
    if not name.endswith(_ATARI_SUFFIX):
        return None
    game = name[: -len(_ATARI_SUFFIX)]
    return game if game in REFERENCE else None


def _resolve(env_id_or_game: str) -> str | None:
    """A table game name given either the game name itself or an env id."""
    return env_id_or_game if env_id_or_game in REFERENCE else game_name(env_id_or_game)


def human_normalized(env_id_or_game: str,
                     score: float | np.ndarray) -> float | np.ndarray | None:
    """Human-normalised score ``(score - random) / (human - random)``.

    Args:
      env_id_or_game: a game name of the table (``"Pong"``) or an env id (``"Pong-v5"``).
      score: raw episode return(s), a number or an array of any shape.

    Returns:
      A float for a number, an array of ``score``'s shape for an array; None when the id is
      not one of the 57 Atari games.
    """
    game = _resolve(env_id_or_game)
    if game is None:
        return None
    random, human = REFERENCE[game]
    normalised = (np.asarray(score, dtype=np.float64) - random) / (human - random)
    return float(normalised) if np.ndim(normalised) == 0 else normalised


def human_normalized_scores(env_id: str, returns) -> np.ndarray | None:
    """Human-normalised scores ``[N]`` of the returns ``[N]`` of an env; None for an env
    that is not one of the 57 Atari games (the score normaliser the evaluate commands
    pass to ``runtime.commands.evaluation``)."""
    if game_name(env_id) is None:
        return None
    return np.asarray(human_normalized(env_id, np.asarray(returns, np.float64)))
