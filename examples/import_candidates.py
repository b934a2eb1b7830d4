"""Import what a Mem0 or LangGraph store holds about one subject into fedmem as
candidates, review them and promote the approved ones into builtin memory.

A candidate is not memory until someone reviews it: this script approves the
records whose text passes `keep` (a stand-in for a human reviewer) and rejects the
rest. Runs with a person's key (tenant admin or the agent's developer), not an
agent's key.

    python examples/import_candidates.py http://127.0.0.1:8000 fm_user… <agent id> <engine id> <subject>
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from fedmem_client.errors import error_for

IMPORTS = "/v1/memory/candidates/imports"


def _call(http: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    response = http.request(method, path, **kwargs)
    if response.status_code >= 400:
        raise error_for(response.status_code, response.json() if response.content else None)
    return response.json() if response.content else None


def import_and_promote(
    url: str,
    key: str,
    *,
    agent_id: str,
    engine_id: str,
    subject: str,
    limit: int = 100,
    keep: Callable[[dict[str, Any]], bool] = lambda candidate: True,
    timeout: float = 120.0,
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        body = {"agent_id": agent_id, "engine_id": engine_id, "subject": subject, "limit": limit}
        job = _call(http, "POST", IMPORTS, json=body)
        deadline = time.monotonic() + timeout
        while job["status"] not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"import job {job['id']} still {job['status']}")
            time.sleep(0.5)
            job = _call(http, "GET", f"/v1/jobs/{job['id']}")
        if job["status"] == "failed":
            raise RuntimeError(f"import job failed: {job}")
        pending = _call(
            http,
            "GET",
            "/v1/memory/candidates",
            params={"provider": engine_id, "subject": subject, "status": "pending"},
        )
        promoted, rejected = [], []
        for candidate in pending:
            if keep(candidate):
                _call(
                    http,
                    "POST",
                    f"/v1/memory/candidates/{candidate['id']}/review",
                    json={"decision": "approve", "reason": "Reviewed by the import script."},
                )
                done = _call(http, "POST", f"/v1/memory/candidates/{candidate['id']}/promote")
                promoted.append(done["item_id"])
            else:
                _call(
                    http,
                    "POST",
                    f"/v1/memory/candidates/{candidate['id']}/review",
                    json={"decision": "reject", "reason": "Not worth keeping."},
                )
                rejected.append(candidate["id"])
        return {"job": job, "promoted": promoted, "rejected": rejected}


def main(argv: list[str]) -> None:
    url, key, agent_id, engine_id, subject = argv[1:6]
    outcome = import_and_promote(url, key, agent_id=agent_id, engine_id=engine_id, subject=subject)
    print(f"promoted {len(outcome['promoted'])}, rejected {len(outcome['rejected'])}")


if __name__ == "__main__":
    main(sys.argv)
