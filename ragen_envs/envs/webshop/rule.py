"""The WebShop paper's rule baseline, played from the observation text alone.

Yao et al. 2022 (WebShop, arXiv 2207.01206), Table 2, row "Rule": search the instruction
as it is, click the first result, buy without selecting any option.  On the real
catalogue it scores 45.6 (mean reward x 100) with 9.6 % success (:data:`PAPER_SCORE`,
:data:`PAPER_SUCCESS`); ``scripts/measure_reward_exploits.py webshop`` prints ours next to
them for both catalogue variants, and ``tests/envs/test_webshop.py`` pins them.
"""

from __future__ import annotations

import re

from ...core import TextEnv

__all__ = ["PAPER_SCORE", "PAPER_SUCCESS", "rule_policy"]

#: The rule baseline's score in the WebShop paper (Table 2): mean reward x 100.
PAPER_SCORE = 45.6
#: The rule baseline's success rate in the WebShop paper (Table 2), as a fraction.
PAPER_SUCCESS = 0.096

_INSTRUCTION = re.compile(r"^Instruction: (.*)$", re.MULTILINE)
_FIRST_RESULT = re.compile(r"^\[1\] (\S+) \|", re.MULTILINE)


def rule_policy(env: TextEnv, observation: str) -> list[str]:
    """The next action of the rule baseline, read from ``observation`` only.

    On the search page ``search[<instruction>]`` (cut to the env's ``max_query_chars``);
    on page 1 of the results ``click[<first product>]`` (``click[back to search]`` when
    nothing matched, as the paper's agent would have nothing to click); on an item page
    ``click[buy now]``.  ``env`` is used only for the query length cap.
    """
    if "\nPage: search\n" in observation:
        m = _INSTRUCTION.search(observation)
        query = m.group(1) if m else ""
        return [f"search[{query[: int(env.config['max_query_chars'])]}]"]
    if "\nPage: results of search[" in observation:
        m = _FIRST_RESULT.search(observation)
        return [f"click[{m.group(1)}]" if m else "click[back to search]"]
    return ["click[buy now]"]
