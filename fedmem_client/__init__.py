"""A typed Python client for the fedmem API, sync and async.

from fedmem_client import FedmemClient

with FedmemClient("http://127.0.0.1:8000", api_key="fm_…") as fm:
    memory = fm.agent("<agent id>")
    memory.remember("Alice prefers green tea", scope="user", user_id="alice")
    for hit in memory.recall("what does Alice drink?", user_id="alice")["results"]:
        print(hit["content"])
"""

from fedmem_client.client import AgentMemory, AsyncAgentMemory, AsyncFedmemClient, FedmemClient
from fedmem_client.errors import (
    EngineUnavailable,
    FedmemError,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    ValidationError,
)

__all__ = [
    "AgentMemory",
    "AsyncAgentMemory",
    "AsyncFedmemClient",
    "EngineUnavailable",
    "FedmemClient",
    "FedmemError",
    "NotAuthenticated",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "ServerError",
    "ValidationError",
]
