"""The training config's error (its own module, so that the sections declared outside
:mod:`ragen_train.config` can raise it without importing the config module)."""

from __future__ import annotations


class TrainConfigError(ValueError):
    """A training config field is unknown, mistyped or out of range (``field`` names it).

    ``field`` is a dotted config path (``optim.lr``) or a command-line option
    (``--config``); ``reason`` says what is wrong.  (Not :class:`ragen_envs.ConfigError`,
    which names a field of an *environment* config.)
    """

    def __init__(self, field_path: str, reason: str):
        self.field = field_path
        self.reason = reason
        where = field_path if field_path.startswith("--") else f"config field {field_path!r}"
        super().__init__(f"{where}: {reason}")
