"""The ragen environments; each module registers nothing itself (see ``ragen_envs/_register.py``)."""
