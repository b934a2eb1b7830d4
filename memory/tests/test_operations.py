"""The operations layer: every surface answers with an operation's result, rendered
once (memory.rendering) and identical to what the documented serializers describe."""

from __future__ import annotations

from memory.enforcement import system_access
from memory.knowledge_serializers import DatasetSerializer
from memory.models import Dataset
from memory.operations import knowledge as ops
from memory.operations import memories
from memory.rendering import dataset_json
from memory.services.items import MemoryDraft


def test_dataset_renderer_matches_the_documented_serializer(world):
    access = system_access(world.agent)
    request = ops.IngestRequest(
        texts=("Restart the ingest worker when the queue stalls.",),
        dataset_id="runbooks",
        scope="agent",
        build_graph=True,
    )
    result = ops.ingest_knowledge(access, request, requested_by=world.owner)
    dataset = Dataset.objects.get(pk=result.outcome.dataset.pk)
    assert dataset_json(dataset) == dict(DatasetSerializer(dataset).data)
    assert result.body()["dataset"] == dict(DatasetSerializer(dataset).data)
    assert result.body()["job"]["url"] == f"/v1/jobs/{dataset.graph_job}"


def test_remember_answers_stored_by_the_builtin_engine(world):
    access = system_access(world.agent)
    request = memories.RememberRequest(draft=MemoryDraft(content="The office opens at nine.", scope="agent"))
    first = memories.remember(access, request)
    again = memories.remember(access, request)
    assert isinstance(first, memories.Remembered) and first.result.status == "stored"
    assert (first.status, again.status) == (201, 200)
    assert again.body()["deduplicated"] is True and again.body()["id"] == first.body()["id"]
