"""The memory loop end to end against a live fedmem, with a deterministic fake chat."""

from __future__ import annotations

import json
import re

import pytest

from fedmem_client import FedmemClient
from fedmem_client.framing import frame as client_frame
from fedmem_client.loop import MemoryLoop, is_why_question
from governance.services.policies import policy_version_create
from governance.tests import factories as f
from memory.enforcement import system_access
from memory.models import MemoryItem
from memory.retrieval.framing import frame as server_frame
from memory.tests.conftest import remember
from memory.tests.graph_helpers import INCIDENT, fact

pytestmark = pytest.mark.django_db(transaction=True)

BLOCK = re.compile(
    r"<<<MEMORY_DATA_BEGIN nonce=(\w+)>>>\n[^\n]*\n(.*?)\n<<<MEMORY_DATA_END nonce=\1>>>", re.S
)


class FakeChat:
    """Answers from what it was given: echoes each injected fact, then says something new."""

    def __init__(self) -> None:
        self.calls: list[list[dict]] = []

    def injected(self, call: int = -1) -> list[dict]:
        rows = []
        for message in self.calls[call]:
            if message["role"] == "system":
                for block in BLOCK.finditer(message["content"]):
                    rows += [json.loads(line) for line in block.group(2).split("\n")]
        return rows

    def __call__(self, messages: list[dict]) -> str:
        self.calls.append(messages)
        echoed = " ".join(row["content"].rstrip(".") + "." for row in self.injected())
        return f"{echoed} I will keep that in mind.".strip()


@pytest.fixture
def memory(world, live_server):
    with FedmemClient(live_server.url, f.agent_key(world.agent), max_retries=1) as client:
        yield client.agent(str(world.agent.pk))


def ask(loop, text: str) -> str:
    return loop([{"role": "user", "content": text}])


def test_client_frame_is_the_server_frame():
    rows = [{"id": "1", "content": "a <b>\u2028c\u202e \U0001f600 \x00"}, {"content": "plain"}]
    assert client_frame(rows, "ab" * 16) == server_frame(rows, "ab" * 16)


def test_why_questions_take_the_graph():
    assert is_why_question("Why did checkout fail?") and is_why_question("What led to the outage?")
    assert not is_why_question("Where is the VPN gateway?")


def test_recalled_facts_are_injected_framed_once_per_conversation(world, memory):
    access = system_access(world.agent)
    remember(access, "Alice prefers green tea", scope="user", user_id="alice")
    remember(access, "Alice lives in Lisbon", scope="user", user_id="alice")
    chat = FakeChat()
    loop = MemoryLoop(memory, chat, user_id="alice", max_facts=1)
    ask(loop, "What tea does Alice like?")
    first = chat.injected()
    assert [row["content"] for row in first] == ["Alice prefers green tea"]
    system = [m for m in chat.calls[0] if m["role"] == "system"]
    assert len(system) == 1 and chat.calls[0][-1] == {"role": "user", "content": "What tea does Alice like?"}
    ask(loop, "What tea does Alice like again?")
    assert "Alice prefers green tea" not in [row["content"] for row in chat.injected()]
    assert MemoryItem.objects.count() == 2  # the loop stores nothing by default


def test_budget_in_characters_and_minimum_score(world, memory):
    access = system_access(world.agent)
    remember(access, "The office coffee machine is on floor two " + "x" * 300, scope="user", user_id="bob")
    remember(access, "The coffee machine takes oat milk", scope="user", user_id="bob")
    chat = FakeChat()
    ask(MemoryLoop(memory, chat, user_id="bob", max_chars=100), "Where is the coffee machine?")
    assert [row["content"] for row in chat.injected()] == ["The coffee machine takes oat milk"]
    chat = FakeChat()
    ask(MemoryLoop(memory, chat, user_id="bob", min_score=0.99), "Where is the coffee machine?")
    assert chat.injected() == []


def test_why_question_reaches_the_root_cause(world, memory):
    access = system_access(world.agent)
    for session, text in INCIDENT:
        fact(access, text, session_id=session)
    chat = FakeChat()
    loop = MemoryLoop(memory, chat, scopes=["agent"])
    ask(loop, "Why did we lose revenue this quarter?")
    assert loop.turns[-1].mode == "graph"
    contents = [row["content"] for row in chat.injected()]
    assert "Verbose debug logging led to a full disk on db-1." in contents


def test_stores_the_exchange_only_when_asked_redacted_never_recalled_text(world, memory):
    access = system_access(world.agent)
    remember(access, "Carol's laptop is a ThinkPad", scope="user", user_id="carol")
    chat = FakeChat()
    loop = MemoryLoop(
        memory,
        chat,
        user_id="carol",
        store_user=True,
        store_assistant=True,
        redact=lambda text: text.replace("hunter2", "[redacted]"),
    )
    ask(loop, "My laptop password is hunter2, which laptop do I have?")
    stored = {i.metadata["role"]: i for i in MemoryItem.objects.filter(source="memory-loop")}
    assert stored["user"].content == "My laptop password is [redacted], which laptop do I have?"
    assert (stored["user"].scope, stored["user"].record_kind, stored["user"].user_id) == (
        "user",
        "message",
        "carol",
    )
    # The reply echoed the recalled fact; only its new sentence is stored.
    assert stored["assistant"].content == "I will keep that in mind."
    assert not MemoryItem.objects.filter(content__contains="MEMORY_DATA").exists()
    before = MemoryItem.objects.count()
    skip_all = MemoryLoop(memory, FakeChat(), user_id="carol", store_user=True, redact=lambda text: None)
    ask(skip_all, "Remember my PIN 1234")
    assert MemoryItem.objects.count() == before


def test_stores_nothing_the_policy_forbids(world, memory):
    policy_version_create(agent=world.agent, policy={"write_scopes": ["agent"], "default_scope": "agent"})
    loop = MemoryLoop(memory, FakeChat(), user_id="dave", store_user=True, store_scope="user")
    ask(loop, "I moved to Berlin last week")
    assert MemoryItem.objects.count() == 0
    assert loop.turns[-1].skipped == ["user: scope user is not in the policy's write_scopes"]
    policy_version_create(
        agent=world.agent,
        policy={"modes": {"agent": False}, "write_scopes": ["agent"], "default_scope": "agent"},
    )
    loop = MemoryLoop(memory, FakeChat(), store_user=True)
    ask(loop, "The deploy window is Tuesday")
    assert MemoryItem.objects.count() == 0 and "agent mode is off" in loop.turns[-1].skipped[0]
