"""The config of a run: its fields and their defaults (``fields``), validation and
derived sizes (``validation``), a config that does not load (``problems``), sweeps
(``sweep``), population-based training's plan (``pbt``), an older run's saved config read
under today's fields (``saved``), the XLA runtime settings (``xla_flags``), the agent's
network and learner (``agent``, ``build``), the memory plan (``memory``) and the memory
check by XLA's figure (``memory_check``).
Imports ``rlcore``, ``runtime.process`` and itself."""
