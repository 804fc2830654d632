"""A command's life as a process: exit codes and one-line failures (``exits``,
``failure``, ``one_line``), signals (``signals``), absl and argparse flag parsing
(``flags``, ``arguments``) and the checks of output paths (``paths``). Imports nothing of
ours but itself and ``rlcore.names`` (which files are ours; no library), so a command can
fail cleanly before any library loads."""
