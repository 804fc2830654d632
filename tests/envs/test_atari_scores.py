"""The Atari reference table, env-id to game mapping, and human-normalised scores."""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
import pytest

from envs import atari_scores
from envs.atari_scores import REFERENCE, game_name, human_normalized

# The 57 games of the Atari-57 benchmark, in EnvPool's spelling.
ATARI_57 = (
    "Alien Amidar Assault Asterix Asteroids Atlantis BankHeist BattleZone BeamRider Berzerk "
    "Bowling Boxing Breakout Centipede ChopperCommand CrazyClimber Defender DemonAttack "
    "DoubleDunk Enduro FishingDerby Freeway Frostbite Gopher Gravitar Hero IceHockey Jamesbond "
    "Kangaroo Krull KungFuMaster MontezumaRevenge MsPacman NameThisGame Phoenix Pitfall Pong "
    "PrivateEye Qbert Riverraid RoadRunner Robotank Seaquest Skiing Solaris SpaceInvaders "
    "StarGunner Surround Tennis TimePilot Tutankham UpNDown Venture VideoPinball WizardOfWor "
    "YarsRevenge Zaxxon"
).split()


def test_table_has_the_57_games_with_human_above_random():
    assert len(ATARI_57) == 57
    assert isinstance(REFERENCE, dict)
    assert sorted(REFERENCE) == sorted(ATARI_57)
    for game, (random, human) in REFERENCE.items():
        assert math.isfinite(random) and math.isfinite(human) and human > random, game


@pytest.mark.parametrize("game, random, human", [
    ("Breakout", 1.7, 30.5),
    ("Pong", -20.7, 14.6),
    ("MontezumaRevenge", 0.0, 4753.3),
    ("Skiing", -17098.1, -4336.9),
    ("Surround", -10.0, 6.5),
    ("VideoPinball", 0.0, 17667.9),   # Agent57's random score (dqn_zoo has 16256.9)
    ("Alien", 227.8, 7127.7),
])
def test_known_reference_scores(game, random, human):
    assert REFERENCE[game] == (random, human)


def test_table_is_package_data():
    csv_text = resources.files("envs.data").joinpath("atari_human_random.csv").read_text()
    assert csv_text.splitlines()[0] == "game,random,human"
    assert len(csv_text.strip().splitlines()) == 58


@pytest.mark.parametrize("text, problem", [
    ("name,random,human\nPong,-20.7,14.6\n", "header"),
    ("game,random,human\nPong,-20.7,14.6\nPong,-20.7,14.6\n", "twice"),
    ("game,random,human\nPong,14.6,-20.7\n", "not above"),
])
def test_parse_table_rejects_bad_tables(text, problem):
    with pytest.raises(ValueError, match=problem):
        atari_scores._parse_table(text)


def test_every_envpool_atari_id_of_the_57_maps_to_its_game():
    envpool = pytest.importorskip("envpool")
    v5_ids = [e for e in envpool.list_all_envs() if e.endswith("-v5")]
    for game in ATARI_57:
        assert f"{game}-v5" in v5_ids, game
    for env_id in v5_ids:
        stem = env_id[: -len("-v5")]
        expected = stem if stem in REFERENCE else None   # e.g. Tetris-v5, Ant-v5: None
        assert game_name(env_id) == expected, env_id
        assert game_name(f"envpool:{env_id}") == expected, env_id


@pytest.mark.parametrize("env_id, game", [
    ("Breakout-v5", "Breakout"),
    ("envpool:Breakout-v5", "Breakout"),
    ("ALE/Pong-v5", "Pong"),
    ("MontezumaRevenge-v5", "MontezumaRevenge"),
    ("CartPole-v1", None),
    ("envpool:CartPole-v1", None),
    ("Breakout-MinAtar", None),
    ("gymnax:Breakout-MinAtar", None),
    ("own:Catch", None),
    ("Tetris-v5", None),
    ("Breakout", None),                   # a game name, not an env id
    ("BreakoutNoFrameskip-v4", None),     # not the v5 protocol the table is used with here
])
def test_game_name(env_id, game):
    assert game_name(env_id) == game


def test_human_normalized_arithmetic():
    assert human_normalized("Breakout", 1.7) == 0.0
    assert human_normalized("Breakout-v5", 30.5) == pytest.approx(1.0)
    assert human_normalized("envpool:Pong-v5", 21.0) == pytest.approx((21.0 + 20.7) / 35.3)
    assert human_normalized("Skiing", (-17098.1 - 4336.9) / 2) == pytest.approx(0.5)
    assert isinstance(human_normalized("Pong", 0), float)


def test_human_normalized_keeps_array_shape():
    random, human = REFERENCE["Alien"]
    scores = np.array([[random, human], [2 * human - random, random - (human - random)]])
    np.testing.assert_allclose(human_normalized("Alien-v5", scores), [[0.0, 1.0], [2.0, -1.0]])
    assert human_normalized("Alien", scores).shape == (2, 2)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Breakout-MinAtar", "Tetris-v5"])
def test_human_normalized_is_none_off_atari(env_id):
    assert human_normalized(env_id, 1.0) is None
    assert human_normalized(env_id, np.ones(3)) is None
