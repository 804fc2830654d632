"""Data files shipped with envs (read with ``importlib.resources``, never imported).

- ``atari_human_random.csv``: random-agent and human reference scores of the 57 Atari
  games, columns ``game,random,human`` (source and loader: ``envs.atari_scores``).
"""
