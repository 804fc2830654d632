"""What a command runs once its flags are parsed: training (``train``, its flags
``train_flags``), offline evaluation (``evaluation``, with ``stats`` and ``video``) and the
local multi-process launcher (``launch``). The top room: it may import every other."""
