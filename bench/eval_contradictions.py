"""Update detection through the REST API: do updates supersede, and do unrelated facts stay?

    .venv/bin/python bench/eval_contradictions.py                 # starts its own server
    .venv/bin/python bench/eval_contradictions.py --base-url http://127.0.0.1:8000 --key fm_...
    .venv/bin/python bench/eval_contradictions.py --pairs memory/tests/data/update_pairs.jsonl

Two measurements, both through the routes a user takes (a personal key of an admin
or developer: it creates a fresh agent per run):

* **pairs** (``--pairs``, default ReasonGraph's ``contradictions.jsonl`` under
  ``--data``): for each labelled pair, in a fresh agent of its own, write the old
  fact, then the new one with ``check_contradictions: true``, and read the agent's
  review list (``GET contradictions``): superseded when a decision retires the old
  fact. Precision, recall and F1
  against the labels.
* **unrelated** (``--unrelated``, default ReasonGraph's causal cases and multi-hop
  corpora, every language): every fact written into one agent's memory (scope
  ``agent``), each with the check on, as an agent whose policy turns the check on would
  write them. None of these facts updates another, so every retired fact is a false
  supersede. This is what decides whether the check may be on by default.

Without ``--base-url`` it starts the server as production runs it (daphne serving
``fedmem_site.asgi``, default settings) on ``--port`` with its own data folder
(``var/eval-contradictions``), creates a tenant, an admin and the admin's personal
key, and stops the server at the end. Data is read from ``--data`` (default
``../shared/data/reasongraph`` beside the repository). Prints the machine. Not a
test: it asserts nothing.

``run_contradictions(base_url, key, data_path)`` and ``run_unrelated(base_url, key,
paths)`` return the figures as dicts for other benches.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "reasongraph"
UNRELATED = (
    "causal_cases.jsonl",
    "reasoning_cases_extra.jsonl",
    "causal_cases_batch3.jsonl",
    "causal_cases_batch4_trnl.jsonl",
)


class Api:
    """The few REST calls the eval makes, with the caller's key."""

    def __init__(self, base_url: str, key: str, timeout: float = 120.0) -> None:
        import httpx

        self.http = httpx.Client(
            base_url=base_url.rstrip("/") + "/v1",
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        )

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        response = self.http.request(method, path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    def agent(self, name: str) -> str:
        return self.call("POST", "/agents", {"name": name})["id"]

    def remember(self, agent: str, content: str, check: bool) -> dict:
        body = {"content": content, "scope": "agent", "kind": "fact"}
        if check:
            body["check_contradictions"] = True
        return self.call("POST", f"/memory/agents/{agent}/memories", body)

    def superseded(self, agent: str, item_id: str) -> bool:
        """Whether the agent's review list holds an applied decision retiring the item
        (a retired fact is no longer readable as current by id)."""
        decisions = self.call("GET", f"/memory/agents/{agent}/contradictions?status=applied")["results"]
        return any(d["old_item_id"] == item_id for d in decisions)


def _scores(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def run_contradictions(base_url: str, key: str, data_path: str | Path) -> dict[str, Any]:
    """Labelled (old, new) pairs written old then new with the check on; the figures."""
    pairs = [json.loads(line) for line in Path(data_path).read_text().splitlines() if line.strip()]
    api = Api(base_url, key)
    run = int(time.time() * 1000)
    tp = fp = fn = tn = 0
    wrong: list[dict[str, Any]] = []
    for i, pair in enumerate(pairs):
        agent = api.agent(f"eval-contradictions-{run}-{i}")
        old = api.remember(agent, pair["old"], check=False)
        api.remember(agent, pair["new"], check=True)
        got = api.superseded(agent, old["id"])
        if got and pair["label"]:
            tp += 1
        elif got:
            fp += 1
        elif pair["label"]:
            fn += 1
        else:
            tn += 1
        if got != pair["label"]:
            wrong.append(
                {"old": pair["old"], "new": pair["new"], "label": pair["label"], "kind": pair.get("kind")}
            )
    return {
        "pairs": len(pairs),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        **_scores(tp, fp, fn),
        "wrong": wrong,
    }


def _facts(path: Path) -> list[str]:
    facts: list[str] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        if "sessions" in case:
            facts += [text for session in case["sessions"].values() for text in session]
        else:
            facts += case.get("corpus", [])
    return facts


def run_unrelated(base_url: str, key: str, paths: list[str | Path]) -> dict[str, Any]:
    """Facts that update none of each other, written with the check on into one
    scope; every retirement is a false supersede."""
    seen: set[str] = set()
    facts = [f for p in paths for f in _facts(Path(p)) if not (f in seen or seen.add(f))]
    api = Api(base_url, key)
    agent = api.agent(f"eval-unrelated-{int(time.time() * 1000)}")
    retired: list[dict[str, str]] = []
    text_of: dict[str, str] = {}
    for text in facts:
        written = api.remember(agent, text, check=True)
        text_of[written["id"]] = text
        for decision in written.get("contradictions") or []:
            retired.append(
                {"old": text_of.get(decision["old_item_id"], "?"), "new": text, "reason": decision["reason"]}
            )
    return {
        "facts": len(facts),
        "false_supersedes": len(retired),
        "rate": len(retired) / len(facts) if facts else 0.0,
        "retired": retired,
    }


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _bootstrap(data_dir: Path) -> str:
    """A tenant, its admin and the admin's personal key, in the server's database."""
    os.environ["FEDMEM_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
    os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    from governance.models import Role, User
    from governance.services.agents import api_key_create
    from governance.services.tenancy import membership_grant, tenant_get_or_create

    call_command("migrate", verbosity=0)
    tenant = tenant_get_or_create(slug="eval-contradictions", name="Eval contradictions")
    user, _ = User.objects.get_or_create(username="eval-contradictions-admin")
    membership_grant(user=user, tenant=tenant, role=Role.TENANT_ADMIN)
    _, secret = api_key_create(tenant=tenant, user=user, name=f"eval {int(time.time())}", created_by=user)
    return secret


@contextlib.contextmanager
def serve(port: int, data_dir: Path) -> Iterator[tuple[str, str]]:
    """The production server (daphne, default settings) on loopback; yields (url, key)."""
    import httpx

    if not _free(port):
        raise SystemExit(f"port {port} is taken; pass --port or --base-url")
    data_dir.mkdir(parents=True, exist_ok=True)
    key = _bootstrap(data_dir)
    env = {**os.environ, "FEDMEM_DATA_DIR": str(data_dir), "FEDMEM_API_RATE_LIMIT": "1000000/minute"}
    log = (data_dir / "server.log").open("w")
    server = subprocess.Popen(  # noqa: S603 (our own interpreter and modules)
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fedmem_site.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"server did not start; see {data_dir / 'server.log'}")
            time.sleep(0.5)
        yield base, key
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def report(pairs: dict[str, Any] | None, unrelated: dict[str, Any] | None, source: str) -> None:
    from bench.machine import describe

    print(f"machine: {describe()}")
    print(f"server: {source}")
    if pairs is not None:
        print(
            f"pairs: {pairs['pairs']} (tp {pairs['tp']}, fp {pairs['fp']}, "
            f"fn {pairs['fn']}, tn {pairs['tn']}): "
            f"precision {pairs['precision']:.2f}  recall {pairs['recall']:.2f}  F1 {pairs['f1']:.2f}"
        )
        for row in pairs["wrong"]:
            label = "missed" if row["label"] else "false supersede"
            print(f"  {label} ({row['kind']}): {row['old']!r} <- {row['new']!r}")
    if unrelated is not None:
        print(
            f"unrelated facts with the check on: {unrelated['facts']} written, "
            f"{unrelated['false_supersedes']} wrongly retired ({unrelated['rate']:.1%})"
        )
        for row in unrelated["retired"]:
            print(f"  retired {row['old']!r} <- {row['new']!r}: {row['reason']}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="a running server; without it one is started")
    parser.add_argument("--key", help="personal key of an admin or developer (with --base-url)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("FEDMEM_EVAL_PORT", "8501")))
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FEDMEM_EVAL_DATA", DEFAULT_DATA)))
    parser.add_argument("--pairs", type=Path, help="labelled pairs (default: <data>/contradictions.jsonl)")
    parser.add_argument("--unrelated", type=Path, nargs="*", help="corpora of unrelated facts")
    parser.add_argument("--skip-unrelated", action="store_true", help="only the labelled pairs")
    args = parser.parse_args()
    pairs_path = args.pairs or args.data / "contradictions.jsonl"
    unrelated_paths = args.unrelated or [args.data / name for name in UNRELATED]
    missing = [p for p in [pairs_path, *([] if args.skip_unrelated else unrelated_paths)] if not p.exists()]
    if missing:
        raise SystemExit(f"data not found: {', '.join(map(str, missing))} (pass --data)")

    def run(base: str, key: str) -> tuple[dict, dict | None]:
        pairs = run_contradictions(base, key, pairs_path)
        unrelated = None if args.skip_unrelated else run_unrelated(base, key, unrelated_paths)
        return pairs, unrelated

    if args.base_url:
        if not args.key:
            raise SystemExit("--base-url needs --key")
        report(*run(args.base_url, args.key), source=args.base_url)
        return
    with serve(args.port, ROOT / "var" / "eval-contradictions") as (base, key):
        figures = run(base, key)
    report(*figures, source=f"daphne fedmem_site.asgi on 127.0.0.1:{args.port}, default settings")


if __name__ == "__main__":
    main()
