"""What a command runs once its flags are parsed: training (``train``, its flags
``train_flags``), offline evaluation (``evaluation``, with ``stats`` and ``video``), the
local multi-process launcher (``launch``) and a trained agent back from Python (``policy``:
``runtime.load_policy``). The top room: it may import every other, and ``policy`` the
modes' evaluate modules (tests/test_layout.py, ``MODE_DOORS``)."""
