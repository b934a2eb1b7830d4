"""Knowledge datasets: named collections of documents an agent ingests.

The documents themselves are memory items of record kind ``document`` pointing at
their dataset (``MemoryItem.dataset``), so extraction, policy enforcement,
retention, legal holds and erasure treat them like every other item. The dataset
row holds no content: a name, where its knowledge lives (the builtin engine or a
Cognee instance) and the state of its graph.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from core.vocabulary import Classification, Scope


class Dataset(models.Model):
    """A knowledge dataset of one tenant, owned by the agent that created it."""

    class Graph(models.TextChoices):
        NONE = "none"
        QUEUED = "queued"
        RUNNING = "running"
        BUILT = "built"
        FAILED = "failed"

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey("governance.Agent", on_delete=models.PROTECT, related_name="datasets")
    # The API's dataset_id: a slug unique in the tenant (legal holds name datasets tenant-wide).
    name = models.SlugField(max_length=100)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.AGENT)
    team = models.CharField(max_length=128, blank=True)
    project = models.CharField(max_length=128, blank=True)
    classification = models.PositiveSmallIntegerField(
        choices=Classification.choices, default=Classification.INTERNAL
    )
    legal_hold = models.BooleanField(default=False)
    # "builtin", or the id of the Cognee engine instance the documents were sent to.
    engine = models.CharField(max_length=63, default="builtin")
    documents = models.PositiveIntegerField(default=0)
    graph_status = models.CharField(max_length=8, choices=Graph.choices, default=Graph.NONE)
    graph_job = models.UUIDField(null=True, blank=True)
    graph_built_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "memory_dataset"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="memory_dataset_unique_name"),
        ]
        indexes = [models.Index(fields=["tenant", "agent", "-created_at"], name="memory_dataset_agent")]

    def __str__(self) -> str:
        return self.name
