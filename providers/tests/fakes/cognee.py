"""A local Cognee REST API (topoteretes/cognee ``cognee/api/v1/*/routers``).

Answers go through the routers' own response models, transcribed here
(``DatasetDTO``, ``GraphDTO`` / ``GraphNodeDTO`` / ``GraphEdgeDTO``, the cognify
``PipelineRunInfo``, the status map of ``PipelineRunStatus``; ``OutDTO`` speaks
camelCase). As Cognee does: ``/add`` runs the add pipeline before answering,
``/cognify`` with ``runInBackground`` answers a started run whose status stays
``DATASET_PROCESSING_STARTED`` until the pipeline finishes
(:meth:`CogneeFake.process`), the status endpoint reports it per dataset id, and
sign-in (``/api/v1/auth/login``) issues a JWT that the server can revoke
(:meth:`CogneeFake.expire_tokens`, what an hour passing does to a real token).
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from providers.tests.servers import FakeService, Req, Resp, conform

EMAIL, PASSWORD = "ops@acme.test", "s3cret:with-colon"
STATIC_TOKEN = "cg-token"


class OutDTO(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class DatasetDTO(OutDTO):
    id: str
    name: str
    created_at: str
    updated_at: str | None = None
    owner_id: str


class GraphNodeDTO(OutDTO):
    id: str
    label: str
    type: str
    properties: dict[str, Any]


class GraphEdgeDTO(OutDTO):
    source: str
    target: str
    label: str


class GraphDTO(OutDTO):
    nodes: list[GraphNodeDTO]
    edges: list[GraphEdgeDTO]


class PipelineRunInfo(BaseModel):
    status: str
    pipeline_run_id: str
    dataset_id: str
    dataset_name: str
    payload: Any = None
    data_ingestion_info: list[Any] | None = None


class LoginResponse(BaseModel):
    access_token: str
    token_type: str


def jwt(exp: float) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': EMAIL, 'exp': int(exp)})}.signature"


class CogneeFake(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.datasets: dict[str, dict[str, Any]] = {}
        self.data: dict[str, list[str]] = {}
        self.status: dict[str, str] = {}
        self.running: list[str] = []
        self.fail_next = False
        self.tokens: set[str] = {STATIC_TOKEN}
        self.logins = 0
        self._ids = itertools.count(1)

    def process(self) -> int:
        """The cognify pipeline finishes for every started run."""
        return self.drain(self.running, self._cognify)

    def _cognify(self, dataset_id: str) -> None:
        self.status[dataset_id] = (
            "DATASET_PROCESSING_ERRORED" if self.fail_next else "DATASET_PROCESSING_COMPLETED"
        )
        self.fail_next = False

    def expire_tokens(self) -> None:
        self.tokens = {STATIC_TOKEN}

    def seed_dataset(self, name: str, texts: list[str]) -> str:
        dataset_id = str(uuid.UUID(int=next(self._ids)))
        self.datasets[dataset_id] = {
            "id": dataset_id,
            "name": name,
            "createdAt": "2026-03-01T10:00:00Z",
            "ownerId": str(uuid.UUID(int=0)),
        }
        self.data[dataset_id] = list(texts)
        return dataset_id

    # -- routes -----------------------------------------------------------------------

    def login(self, req: Req) -> Resp:
        form = {k: v[-1] for k, v in parse_qs(req.body.decode()).items()}
        if (form.get("username"), form.get("password")) != (EMAIL, PASSWORD):
            return Resp(400, {"detail": "LOGIN_BAD_CREDENTIALS"})
        token = jwt(time.time() + 3600)
        self.tokens.add(token)
        self.logins += 1
        return Resp(200, conform(LoginResponse, {"access_token": token, "token_type": "bearer"}))

    def add(self, req: Req) -> Resp:
        body = req.body.decode("utf-8", "replace")
        name = re.search(r'name="datasetName"\r\n\r\n([^\r]+)', body).group(1)
        if "." in name or " " in name:  # cognee's check_dataset_name
            return Resp(400, {"detail": "Dataset name cannot contain spaces or dots."})
        texts = re.findall(r'filename="[^"]+"\r\nContent-Type: text/plain\r\n\r\n(.*?)\r\n--', body, re.S)
        dataset = next((d for d in self.datasets.values() if d["name"] == name), None)
        dataset_id = dataset["id"] if dataset else self.seed_dataset(name, [])
        self.data[dataset_id].extend(texts)
        run = {
            "status": "PipelineRunCompleted",
            "pipeline_run_id": str(uuid.uuid4()),
            "dataset_id": dataset_id,
            "dataset_name": name,
        }
        return Resp(200, conform(PipelineRunInfo, run))

    def cognify(self, req: Req) -> Resp:
        out = {}
        for dataset_id in req.json["datasetIds"]:
            if dataset_id not in self.datasets:
                return Resp(404, {"detail": "Dataset not found"})
            self.status[dataset_id] = "DATASET_PROCESSING_STARTED"
            self.running.append(dataset_id)
            out[dataset_id] = conform(
                PipelineRunInfo,
                {
                    "status": "PipelineRunStarted",
                    "pipeline_run_id": str(uuid.uuid4()),
                    "dataset_id": dataset_id,
                    "dataset_name": self.datasets[dataset_id]["name"],
                },
            )
        return Resp(200, out)

    def dataset_status(self, req: Req) -> Resp:
        wanted = req.query.get("dataset") or list(self.datasets)
        return Resp(
            200, {d: self.status.get(d, "DATASET_PROCESSING_INITIATED") for d in wanted if d in self.datasets}
        )

    def search(self, req: Req) -> Resp:
        body = req.json
        words = set(body["query"].lower().split())
        out = []
        for dataset_id in body["datasetIds"]:
            chunks = [
                {"id": f"chunk-{dataset_id[-3:]}-{i}", "text": t, "chunk_index": i}
                for i, t in enumerate(self.data.get(dataset_id, []))
                if words & set(t.lower().split())
            ]
            if body["searchType"] == "GRAPH_COMPLETION":
                chunks = ["Alice leads the robotics team."] if chunks else []
            out.append(
                {
                    "search_result": chunks[: body["topK"]],
                    "dataset_id": dataset_id,
                    "dataset_name": self.datasets[dataset_id]["name"],
                }
            )
        return Resp(200, out)

    def graph(self, req: Req) -> Resp:
        if req.params["id"] not in self.datasets:
            return Resp(404, {"detail": "Dataset not found"})
        node = lambda i, label: {"id": i, "label": label, "type": "Entity", "properties": {}}  # noqa: E731
        graph = {
            "nodes": [node("n1", "Alice"), node("n2", "Robotics team"), node("n3", "Porto")],
            "edges": [
                {"source": "n1", "target": "n2", "label": "leads"},
                {"source": "n1", "target": "n3", "label": "lives_in"},
                {"source": "n2", "target": "n3", "label": "based_in"},
            ],
        }
        return Resp(200, conform(GraphDTO, graph))

    def delete(self, req: Req) -> Resp:
        if self.datasets.pop(req.params["id"], None) is None:
            return Resp(404, {"detail": "Dataset not found"})
        return Resp(200, None)

    def start(self) -> CogneeFake:
        def authed(handler: Any) -> Any:
            def wrapped(req: Req) -> Resp:
                header = req.headers.get("authorization", "")
                if not header.startswith("Bearer ") or header[7:] not in self.tokens:
                    return Resp(401, {"detail": "Unauthorized"})
                return handler(req)

            return wrapped

        route = self.server.route
        route("GET", "/health", lambda req: Resp(200, {"status": "ready", "health": "up", "version": "0.5"}))
        route("POST", "/api/v1/auth/login", self.login)
        route(
            "GET",
            "/api/v1/datasets",
            authed(lambda req: Resp(200, conform(DatasetDTO, list(self.datasets.values())))),
        )
        route("GET", "/api/v1/datasets/status", authed(self.dataset_status))
        route("POST", "/api/v1/add", authed(self.add))
        route("POST", "/api/v1/cognify", authed(self.cognify))
        route("POST", "/api/v1/search", authed(self.search))
        route("GET", "/api/v1/datasets/(?P<id>[^/]+)/graph", authed(self.graph))
        route("DELETE", "/api/v1/datasets/(?P<id>[^/]+)", authed(self.delete))
        self.server.start()
        return self
