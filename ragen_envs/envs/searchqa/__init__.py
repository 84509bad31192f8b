"""SearchQA: answer a question with search and finish actions (spec: ``docs/envs/searchqa.md``).

Modules, one job each:

* :mod:`.scoring` - SQuAD normalisation, exact match, F1, RAGEN's reward rule;
* :mod:`.retrieval` - documents, the local BM25 retriever and the HTTP retrieval client;
* :mod:`.serve` - ``python -m ragen_envs.envs.searchqa.serve``: a local index over HTTP;
* :mod:`.questions` - our, HotpotQA and Natural Questions record formats;
* :mod:`.countries` - the bundled corpus and questions, from ``country_facts.tsv``;
* :mod:`.env` - :class:`SearchQAEnv` (``ragen/SearchQA-v0``);
* :mod:`.register` - the ``register_env`` calls.

``bundled/`` holds the bundled corpus and questions with provenance (rebuilt by
``scripts/build_bundled.py --env searchqa``); ``config.schema.json`` and ``info.schema.json`` the
schemas.  Importing this package imports neither ``bm25s`` nor an HTTP client.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["SearchQAEnv", "parse_search_action"],
    },
)
