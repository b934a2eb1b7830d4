"""Two agents share memory through a team scope and discover each other's facts.

The on-call agent and the database agent each remember what they saw during an
incident in the team scope; each then asks `discover` and finds the other's facts,
linked through the entities and cause->effect relations extraction found.

Needs: both agents' policies allow the team (an admin sets it once):
    {"teams": ["incident-response"], "write_scopes": ["team", "agent"],
     "read_scopes": ["team", "agent"], "default_scope": "team", "modes": {"shared": true}}
and a Celery worker running (extraction), as `make run` starts.

    python examples/shared_memory.py http://127.0.0.1:8000 fm_oncall… fm_database…
"""

from __future__ import annotations

import sys
import time
from typing import Any

from fedmem_client import AgentMemory, FedmemClient

TEAM = "incident-response"
ONCALL_FACTS = ["Verbose debug logging led to a full disk on db-1."]
DATABASE_FACTS = ["The database crash happened because of a full disk on db-1."]


def agent_of(client: FedmemClient) -> AgentMemory:
    return client.agent(client.me()["principal"]["id"])


def wait_for_extraction(memory: AgentMemory, ids: list[str], timeout: float = 120.0) -> None:
    """A write answers at once; entities and causal links come from the worker."""
    deadline = time.monotonic() + timeout
    for item_id in ids:
        while memory.get(item_id)["extraction_status"] == "pending":
            if time.monotonic() > deadline:
                raise TimeoutError("extraction did not finish: is a worker running?")
            time.sleep(0.5)


def run(url: str, oncall_key: str, database_key: str) -> dict[str, Any]:
    with FedmemClient(url, oncall_key) as a, FedmemClient(url, database_key) as b:
        oncall, database = agent_of(a), agent_of(b)
        written = {
            "oncall": [oncall.remember(text, scope="team", team=TEAM)["id"] for text in ONCALL_FACTS],
            "database": [database.remember(text, scope="team", team=TEAM)["id"] for text in DATABASE_FACTS],
        }
        wait_for_extraction(oncall, written["oncall"])
        wait_for_extraction(database, written["database"])
        # Each agent discovers the other's fact from its own question: one seed from
        # hybrid recall, the rest reached over shared entities and causal links.
        seen_by_database = database.discover("what filled the disk on db-1?", scopes=["team"], top_k=1)
        seen_by_oncall = oncall.discover("why did the database crash?", scopes=["team"], top_k=1)
        return {"written": written, "database": seen_by_database, "oncall": seen_by_oncall}


def main(argv: list[str]) -> None:
    url, oncall_key, database_key = argv[1:4]
    outcome = run(url, oncall_key, database_key)
    for who in ("oncall", "database"):
        print(f"{who} discovered:")
        for fact in outcome[who]["results"]:
            print(f"  [{fact['kind']}, hop {fact['hop']}] {fact['content']}")


if __name__ == "__main__":
    main(sys.argv)
