"""The run directory and its parts (``directory``: what a trainer writes and when): file
names (``files``), metrics and log windows (``metrics``, ``windows``), checkpoints,
an older version's read into today's state, and their clock (``checkpoint``,
``older_state``, ``cadence``), a population's history (``population``), resume
(``resume``), the workdir and its lock (``workdir``, ``lock``), curves (``curves``), console
lines (``console``, ``lines``, ``summary``). Imports ``rlcore`` and the rooms below it:
``process``, ``config``, ``distributed``."""
