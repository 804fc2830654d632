"""What a command runs once its flags are parsed: training (``train``, its flags
``train_flags``; from Python, what it returns: ``result``), offline evaluation
(``evaluation``, with ``stats`` and ``video``), the local multi-process launcher
(``launch``) and a trained agent back from Python (``policy``: the one restore of an
agent's params, ``runtime.load_policy``). The top room: it may import every other, and
``policy`` the env's spec from ``envs.registry`` (tests/test_layout.py, ``DOORS``); never a
module of the modes."""
