"""SearchQA: scoring, the action grammar, the bundled data, loaders, retrieval back-ends,
the HTTP retrieval protocol against the served local index, and the oracle."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

import ragen_envs
from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode
from ragen_envs.data.loaders import DataSourceError, MissingExtraError, load_source
from ragen_envs.envs.searchqa import parse_search_action
from ragen_envs.envs.searchqa.questions import detect_format, qa_item_from_record
from ragen_envs.envs.searchqa.retrieval import (
    BM25Retriever,
    Document,
    Hit,
    HttpRetriever,
    RetrievalError,
    corpus_documents,
    format_hits,
    local_bm25_retriever,
    parse_search_r1_response,
)
from ragen_envs.envs.searchqa.scoring import (
    exact_match,
    f1_score,
    normalize_answer,
    qa_reward,
    score_answer,
)
from ragen_envs.envs.searchqa.serve import serve_in_thread

from .conftest import load_script

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "search"
ENV_ID = "ragen/SearchQA-v0"

# ------------------------------------------------------------------ scoring
# (prediction, gold, EM, F1); F1 values hand-computed from token overlaps.
SCORING_TABLE = [
    ("The Eiffel Tower.", "Eiffel Tower", True, 1.0),  # Articles and punctuation
    ("yes", "no", False, 0.0),  # HotpotQA yes/no rule
    ("no", "No.", True, 1.0),
    ("yes", "yes indeed", False, 0.0),  # prediction is "yes", gold is not: F1 0
    ("noanswer", "no answer", False, 0.0),  # "noanswer" is special too
    ("Paris, France", "Paris", False, 2 / 3),  # P = 1/2, R = 1
    ("United States dollar", "US dollar", False, 0.4),  # common 1: P = 1/3, R = 1/2
    ("Washington, D.C.", "washington dc", True, 1.0),
    ("big red house in town", "red car", False, 2 / 7),  # P = 1/5, R = 1/2
    ("an apple a day", "apple day", True, 1.0),
    ("Sucre", "La Paz", False, 0.0),
]


@pytest.mark.parametrize(("pred", "gold", "em", "f1"), SCORING_TABLE)
def test_scoring_table(pred: str, gold: str, em: bool, f1: float) -> None:
    assert exact_match(pred, gold) is em
    assert f1_score(pred, gold) == pytest.approx(f1)


def test_normalisation_is_squad() -> None:
    assert normalize_answer("  The  Eiffel-Tower!! ") == "eiffeltower"
    assert normalize_answer("A Tale of Two Cities") == "tale of two cities"


@pytest.mark.parametrize(
    ("mode", "f1", "em", "expected"),
    [
        ("em_or_f1", 0.4, False, 0.4),  # RAGEN: F1 >= 0.3 pays the F1
        ("em_or_f1", 2 / 7, False, 0.0),  # below 0.3 pays 0
        ("em_or_f1", 0.3, False, 0.3),  # the threshold itself pays
        ("em_or_f1", 1.0, True, 1.0),
        ("em", 0.4, False, 0.0),
        ("em", 1.0, True, 1.0),
        ("f1", 2 / 7, False, 2 / 7),
    ],
)
def test_reward_rule(mode: str, f1: float, em: bool, expected: float) -> None:
    from ragen_envs.envs.searchqa.scoring import QAScore

    assert qa_reward(QAScore(em, f1, "g"), mode=mode) == pytest.approx(expected)


def test_best_gold_counts_and_threshold_is_configurable() -> None:
    s = score_answer("DZD", ["Algerian dinar", "DZD"])
    assert s.exact_match and s.best_gold == "DZD"
    s = score_answer("United States dollar", ["US dollar", "USD"])
    assert not s.exact_match and s.f1 == pytest.approx(0.4)
    assert qa_reward(s, f1_threshold=0.5) == 0.0
    with pytest.raises(ValueError, match="reward mode"):
        qa_reward(s, mode="bleu")


# ------------------------------------------------------------------ grammar
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("search[capital of France]", ("search", "capital of France")),
        ("  SEARCH [ capital ]  ", ("search", "capital")),
        ("finish[Paris]", ("finish", "Paris")),
        ("finish[[a] b]", ("finish", "[a] b")),
        ("finish[]", ("finish", "")),
        ("search capital", None),
        ("answer[Paris]", None),
        ("finish[Paris] and more", None),
    ],
)
def test_parse_search_action(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_search_action(text) == expected


def test_invalid_actions_change_nothing() -> None:
    env = ragen_envs.make(ENV_ID, max_query_chars=20)
    obs0, _ = env.reset(seed=4)
    for bad in ("Paris", "search[]", "finish[  ]", "search[" + "x" * 21 + "]", "click[Paris]"):
        obs, reward, terminated, truncated, info = env.step(bad)
        assert (obs, reward, terminated, info["action_is_valid"]) == (obs0, -0.1, False, False), bad
        assert info["invalid_reason"]


def test_episode_ends_on_finish_or_max_steps() -> None:
    env = ragen_envs.make(ENV_ID)
    env.reset(seed=0)
    for k in range(1, 11):
        *_, terminated, truncated, info = env.step("search[capital]")
        assert not terminated and truncated is (k == 10)
    assert info["status"] == "step_limit" and info["searches"] == 10
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("finish[definitely wrong]")
    assert terminated and reward == 0.0 and info["status"] == "failure" and not info["exact_match"]


def test_partial_credit_is_not_success() -> None:
    env = ragen_envs.make(ENV_ID)
    base = env.unwrapped
    # Find a currency question whose gold has two or more words and answer with one of them.
    for seed in range(400):
        env.reset(seed=seed)
        gold = base.item.answers[0]
        if base.item.type == "currency" and len(gold.split()) == 2:
            break
    obs, reward, terminated, _, info = env.step(f"finish[{gold.split()[0]}]")
    assert terminated and not info["success"] and not info["exact_match"]
    assert info["f1"] == pytest.approx(2 / 3) and reward == pytest.approx(2 / 3)
    assert "Gold answer" in obs


def test_observation_lists_documents_with_ids_scores_and_caps() -> None:
    env = ragen_envs.make(ENV_ID, max_doc_chars=60, max_results_chars=300, topk=5)
    env.reset(seed=2)
    obs, *_, info = env.step("search[capital city]")
    assert info["n_results"] == 5 and len(info["result_ids"]) == 5
    assert "[Document 1] (ID: " in obs and "Score: " in obs
    assert "Available actions: search[<query>], finish[<answer>]" in obs
    results = obs.split("(top 5):\n", 1)[1].rsplit("\nAvailable actions", 1)[0]
    assert len(results) <= 300 + len("\n(9 more document(s) not shown: length cap)")
    assert "length cap" in results


def test_format_hits_caps() -> None:
    hits = [Hit(Document(f"d{i}", f"T{i}", "word " * 100), 10.0 - i) for i in range(5)]
    text = format_hits(hits, max_doc_chars=50, max_total_chars=10_000)
    assert text.count("[Document ") == 5 and text.count("...") == 5
    assert "(ID: d0, Score: 10.000)" in text
    capped = format_hits(hits, max_doc_chars=800, max_total_chars=500)
    body = capped.rsplit("\n(", 1)[0]
    assert len(body) <= 503 and "more document(s) not shown" in capped
    assert format_hits([], max_doc_chars=10, max_total_chars=100) == "No documents found."
    assert "Score: n/a" in format_hits(
        [Hit(Document("x", "", "t"), None)], max_doc_chars=10, max_total_chars=100
    )


# ------------------------------------------------------------- bundled data
def test_bundled_files_are_reproducible() -> None:
    assert load_script("build_bundled").build(check=True, envs=["searchqa"]) == []


def test_bundled_questions_are_answerable_from_the_corpus() -> None:
    docs = {d.title: d for d in corpus_documents("bundled:searchqa-countries-corpus")}
    questions = [qa_item_from_record(r) for r in load_source("bundled:searchqa-countries")]
    assert len(questions) >= 1800
    hops = defaultdict(int)
    for q in questions:
        assert q is not None and q.supporting_titles
        hops[q.hops] += 1
        for title in q.supporting_titles:
            assert title in docs, (q.id, title)
        if q.answers[0] in ("yes", "no"):
            continue
        support = " ".join(docs[t].text for t in q.supporting_titles).lower()
        assert any(a.lower() in support for a in q.answers), (q.id, q.answers)
    assert hops[1] >= 900 and hops[2] >= 600
    assert {q.answers[0] for q in questions if q.type == "yes_no"} == {"yes", "no"}


def test_splits_are_disjoint_by_country() -> None:
    owner: dict[str, str] = {}
    sizes = {}
    for split in ("train", "validation", "test"):
        env = ragen_envs.make(ENV_ID, split=split)
        items = env.unwrapped.split_items()
        sizes[split] = len(items)
        for item in items:
            assert owner.setdefault(item.key_text, split) == split, item.key_text
    assert sum(sizes.values()) == 1815 and min(sizes.values()) >= 100


# ------------------------------------------------------------------- oracle
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_oracle_reaches_reward_one_and_retrieves_the_supporting_documents(split: str) -> None:
    env = ragen_envs.make(ENV_ID, split=split)
    base = env.unwrapped
    docs = {d.title: d.id for d in corpus_documents("bundled:searchqa-countries-corpus")}
    n = max(200, len(base.split_items())) if split == "train" else len(base.split_items())
    for seed in range(n):
        result = run_episode(env, oracle_policy, seed=seed)
        assert result.success and result.episode_return == 1.0 and len(result.actions) <= 3
        titles = base.item.supporting_titles
        searched = [info["result_ids"] for info in result.infos[1:-1]]
        assert [docs[t] in ids for t, ids in zip(titles, searched)] == [True] * len(titles)


def test_random_baseline_rarely_succeeds() -> None:
    env = ragen_envs.make(ENV_ID)
    results = [run_episode(env, make_random_policy(7), seed=s) for s in range(200)]
    assert sum(r.success for r in results) <= 10
    assert all(r.status in ("success", "failure", "step_limit") for r in results)


# ------------------------------------------------------------------ loaders
def test_hotpotqa_loader() -> None:
    records = load_source(str(DATA / "hotpot_tiny.json"))
    assert [detect_format(r) for r in records] == ["hotpotqa"] * 4
    items = [qa_item_from_record(r) for r in records]
    assert items[3] is None  # the unlabelled test record
    a, b, c = items[:3]
    assert (a.id, a.answers, a.supporting_titles, a.type, a.hops) == (
        "hp-0001",
        ("Orla River",),
        ("Glass Museum of Veldmark", "Veldmark"),
        "bridge",
        2,
    )
    assert b.answers == ("yes",) and c.supporting_titles == ("Orla Bridge",)
    docs = corpus_documents(str(DATA / "hotpot_tiny.json"))
    assert [d.title for d in docs] == [
        "Glass Museum of Veldmark",
        "Veldmark",
        "Orla Bridge",
        "Veldmark Tigers",
        "Ostrand Owls",
        "Nothing",
    ]
    assert (
        docs[1].text
        == "Veldmark is a small city in the hills. The Orla River flows through Veldmark."
    )


def test_hotpotqa_env_with_its_own_context_as_corpus() -> None:
    path = str(DATA / "hotpot_tiny.json")
    for split in ("train", "validation", "test"):
        env = ragen_envs.make(ENV_ID, data_source=path, corpus=path, split=split)
        try:
            items = env.unwrapped.split_items()
        except DataSourceError:  # a 3-question file leaves some splits empty
            continue
        for seed in range(len(items)):
            assert run_episode(env, oracle_policy, seed=seed).success


def test_natural_questions_loaders() -> None:
    simplified = [
        qa_item_from_record(r) for r in load_source(str(DATA / "nq_simplified_tiny.jsonl"))
    ]
    assert simplified[0].answers == ("Anton Reiss",) and simplified[0].supporting_titles == (
        "Veldmark Chapel",
    )
    assert simplified[0].id == "101" and simplified[0].type == "nq"
    assert simplified[1].answers == ("yes",)
    assert simplified[2] is None  # no short or yes/no answer
    original = [qa_item_from_record(r) for r in load_source(str(DATA / "nq_original_tiny.jsonl"))]
    assert original[0].answers == ("Old Veldmark",)  # HTML tokens dropped from the span
    nq_open = [qa_item_from_record(r) for r in load_source(str(DATA / "nq_open_tiny.jsonl"))]
    assert nq_open[0].answers == ("Mara Linden", "Linden") and nq_open[0].id.startswith("nq_open-")
    sr1 = [qa_item_from_record(r) for r in load_source(str(DATA / "search_r1_tiny.jsonl"))]
    assert [i.answers for i in sr1] == [
        ("Anton Reiss",),
        ("Veldmark Tigers", "the Tigers"),
        ("Old Veldmark",),
    ]
    assert sr1[0].id == "train_0"


def test_natural_questions_env_over_a_wiki18_corpus() -> None:
    env = ragen_envs.make(
        ENV_ID,
        data_source=str(DATA / "nq_open_tiny.jsonl"),
        corpus=str(DATA / "corpus_tiny.jsonl"),
        split="train",
    )
    env.reset(options={"index": 0})
    obs, *_ = env.step("search[who designed the orla bridge]")
    assert "(ID: 2, Score:" in obs.split("[Document 1]", 1)[1].split("\n", 1)[0]
    assert '"Orla Bridge"' in obs


def test_corpus_records_in_every_layout() -> None:
    docs = corpus_documents(str(DATA / "corpus_tiny.jsonl"))
    assert [(d.id, d.title) for d in docs] == [
        ("1", "Veldmark"),
        ("2", "Orla Bridge"),
        ("3", "Veldmark Chapel"),
        ("4", ""),
    ]
    assert (
        docs[2].contents
        == '"Veldmark Chapel"\nThe ceiling of the chapel was painted by Anton Reiss in 1702.'
    )


# ---------------------------------------------------------------- retrieval
def test_bm25_ranking_is_stable_and_positive_only() -> None:
    r = local_bm25_retriever("bundled:searchqa-countries-corpus")
    hits = r.retrieve(["Economy of Peru", "zzzz qqqq"], 5)
    assert hits[0][0].document.id == "peru-economy"
    assert hits[1] == []
    scores = [h.score for h in hits[0]]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_missing_bm25s_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)
    with pytest.raises(
        MissingExtraError,
        match=re.escape(
            "pip install 'ragen-envs[search]' (or 'ragen[search]' for the full project"
        ),
    ):
        BM25Retriever([Document("a", "A", "text")])


def test_import_loads_neither_bm25s_nor_an_http_client() -> None:
    code = (
        "import sys, ragen_envs; e = ragen_envs.make('ragen/SearchQA-v0'); e.reset(seed=0); "
        "print(sorted(m for m in ('bm25s', 'http.client', 'urllib.request', 'httpx', 'requests') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------- HTTP protocol
@pytest.fixture(scope="module")
def served() -> str:
    server, url = serve_in_thread(local_bm25_retriever("bundled:searchqa-countries-corpus"))
    yield url
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("protocol", ["search-r1", "ragen"])
def test_env_works_unchanged_against_the_served_index(served: str, protocol: str) -> None:
    remote = ragen_envs.make(
        ENV_ID, retriever="http", retriever_url=served, retriever_protocol=protocol
    )
    local = ragen_envs.make(ENV_ID)
    for seed in range(25):
        a, b = (
            run_episode(remote, oracle_policy, seed=seed),
            run_episode(local, oracle_policy, seed=seed),
        )
        assert a.success and (a.observations, a.rewards, a.infos) == (
            b.observations,
            b.rewards,
            b.infos,
        )


def test_search_r1_wire_format(served: str) -> None:
    import urllib.request

    def post(body: object) -> tuple[int, dict]:
        req = urllib.request.Request(
            served, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, body = post({"queries": ["Economy of Peru", "Lima"], "topk": 2, "return_scores": True})
    assert status == 200 and len(body["result"]) == 2 and len(body["result"][0]) == 2
    first = body["result"][0][0]
    assert set(first) == {"document", "score"} and first["document"]["id"] == "peru-economy"
    assert first["document"]["contents"].startswith('"Economy of Peru"\n')
    status, body = post({"queries": ["Lima"], "topk": 1})  # return_scores defaults to false
    assert "score" not in body["result"][0][0] and body["result"][0][0]["title"] == "Lima"
    status, body = post({"query": "Lima", "top_k": 1})  # RAGEN's request shape
    assert status == 200 and body["results"][0]["id"] == "lima" and body["num_results"] == 1
    for bad in ({"queries": "Lima"}, {"queries": ["x"], "topk": 0}, {"nothing": 1}, [1, 2]):
        status, body = post(bad)
        assert status == 400 and body["error"]


def test_served_by_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragen_envs.envs.searchqa.serve", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Serving 660 documents on http://127.0.0.1:"), (
            line + proc.stderr.read()
        )
        url = line.split(" on ", 1)[1].split()[0]
        env = ragen_envs.make(ENV_ID, retriever="http", retriever_url=url)
        for seed in range(5):
            assert run_episode(env, oracle_policy, seed=seed).success
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_http_errors_are_clear() -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = ragen_envs.make(
        ENV_ID, retriever="http", retriever_url=f"http://127.0.0.1:{port}/retrieve"
    )
    env.reset(seed=0)
    with pytest.raises(
        RetrievalError, match=rf"cannot reach retrieval server http://127.0.0.1:{port}/retrieve"
    ):
        env.step("search[Lima]")
    with pytest.raises(ValueError, match="protocol"):
        HttpRetriever("http://127.0.0.1:1/retrieve", protocol="grpc")


def test_http_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections but never answers
    accepted: list[socket.socket] = []
    t = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    t.start()
    try:
        client = HttpRetriever(
            f"http://127.0.0.1:{listener.getsockname()[1]}/retrieve", timeout_s=0.3
        )
        with pytest.raises(RetrievalError, match="did not answer within 0.3 s"):
            client.retrieve(["Lima"], 3)
    finally:
        for c in accepted:
            c.close()
        listener.close()


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"result": []}, "1 entries"),
        ({"results": [[]]}, "'result' list"),
        ({"result": [["just a string"]]}, None),
        ({"result": [[{"document": {"id": 1}, "score": 0.5}]]}, "malformed document"),
        (
            {"result": [[{"document": {"id": "a", "contents": "x"}, "score": "high"}]]},
            "malformed score",
        ),
    ],
)
def test_search_r1_response_parsing(payload: object, match: str | None) -> None:
    if match is None:  # a bare string document is read as untitled contents
        hits = parse_search_r1_response(payload, 1)
        assert hits[0][0].document.text == "just a string" and hits[0][0].score is None
        return
    with pytest.raises(RetrievalError, match=match):
        parse_search_r1_response(payload, 1)
