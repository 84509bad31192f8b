"""SearchQA support: answer scoring, retrieval back-ends, question loaders, bundled data.

* :mod:`.scoring` — SQuAD normalisation, exact match, F1, RAGEN's reward rule;
* :mod:`.retrieval` — documents, the local BM25 retriever and the HTTP retrieval client;
* :mod:`.serve` — ``python -m ragen_envs.search.serve``: a local index over HTTP;
* :mod:`.questions` — our, HotpotQA and Natural Questions record formats;
* :mod:`.countries` / :mod:`.build_corpus` — the bundled corpus and questions.

The environment is :class:`ragen_envs.envs.searchqa.SearchQAEnv` (``ragen/SearchQA-v0``;
spec ``docs/envs/searchqa.md``).  Importing this package imports neither ``bm25s`` nor
an HTTP client.
"""
