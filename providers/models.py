"""Engine instances (external memory providers) and per-tenant credential references.

No secret is ever stored here: ``credential_ref`` holds a reference
(``env://NAME`` or ``openbao://mount/path#key``) resolved at call time by
:mod:`providers.credentials`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from governance.models import Tenant
from governance.models.restricted import RestrictedQuerySet

# The builtin engine is listed next to declared instances, so its id is reserved.
BUILTIN_ENGINE_ID = "builtin"


class Isolation(models.TextChoices):
    """What an engine guarantees between tenants, weakest first."""

    NONE = "none", "None: tenants share the engine's namespace"
    LOGICAL = "logical", "Logical: one engine, every record scoped to its tenant"
    DEDICATED = "dedicated", "Dedicated: an engine instance per tenant"


ISOLATION_ORDER = {Isolation.NONE: 0, Isolation.LOGICAL: 1, Isolation.DEDICATED: 2}


class AccessControl(models.TextChoices):
    """Whose credential a call to the engine carries."""

    PLATFORM_KEY = "platform_key", "The instance's credential, unless the tenant set its own"
    TENANT_KEY = "tenant_key", "Each tenant must set its own credential"
    NONE = "none", "The engine takes no credential"


class EngineInstanceQuerySet(RestrictedQuerySet["EngineInstance"]):
    def visible_to_tenant(self, tenant: Tenant | None) -> EngineInstanceQuerySet:
        """Shared instances plus the tenant's own dedicated ones (never another tenant's)."""
        if tenant is None:
            return self.filter(tenant__isnull=True)
        return self.filter(Q(tenant__isnull=True) | Q(tenant=tenant))


class EngineInstance(models.Model):
    """A declared external memory engine (mem0, zep, letta, ...) that fedmem may call.

    ``tenant`` set: a dedicated instance only that tenant sees and uses.
    ``tenant`` empty: a shared instance every tenant sees; each tenant may bring
    its own credential (:class:`TenantEngineCredential`).
    """

    id = models.SlugField(primary_key=True, max_length=63)
    provider = models.CharField(max_length=32, help_text="Adapter kind from providers.adapters.registry")
    base_url = models.URLField(max_length=500)
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="engine_instances"
    )
    credential_ref = models.CharField(
        max_length=500, blank=True, help_text="env://NAME or openbao://mount/path#key"
    )
    access_control = models.CharField(
        max_length=16, choices=AccessControl.choices, default=AccessControl.PLATFORM_KEY
    )
    tls_verify = models.BooleanField(default=True)
    timeout_seconds = models.FloatField(
        default=10.0, validators=[MinValueValidator(0.05), MaxValueValidator(120.0)]
    )
    options = models.JSONField(default=dict, blank=True, help_text="Provider-specific settings")
    allow_development_hosts = models.BooleanField(
        default=False,
        help_text="Allow loopback/private addresses (a local engine during development)",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = EngineInstanceQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=~Q(id=BUILTIN_ENGINE_ID), name="engine_id_not_builtin"),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gte=0.05, timeout_seconds__lte=120.0),
                name="engine_timeout_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.provider})"

    @property
    def is_shared(self) -> bool:
        return self.tenant_id is None


class TenantEngineCredential(models.Model):
    """A tenant's own credential reference for an engine instance (never the secret)."""

    engine = models.ForeignKey(EngineInstance, on_delete=models.CASCADE, related_name="tenant_credentials")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="engine_credentials")
    credential_ref = models.CharField(max_length=500)
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["engine", "tenant"], name="engine_credential_one_per_tenant"),
        ]
        ordering = ["engine_id", "tenant_id"]

    def __str__(self) -> str:
        return f"credential of {self.tenant_id} on {self.engine_id}"


class ProviderWrite(models.Model):
    """A write an engine accepted but had not finished when it answered (``queued``),
    followed until the provider itself says ``settled`` or ``failed``.

    ``handle`` is what the provider gave to ask about it (a Mem0 event id, a Zep task
    uuid, a Cognee dataset and pipeline run, a Graphiti message uuid); ``scope`` the
    namespace the write was made in, so the follow-up asks as the same caller.
    Holds ids and provider statuses only, never the written text.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        SETTLED = "settled"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        "governance.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    engine = models.ForeignKey(EngineInstance, on_delete=models.CASCADE, related_name="writes")
    operation = models.CharField(max_length=32)  # remember | forget | build_graph
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    handle = models.JSONField(default=dict)
    scope = models.JSONField(default=dict)
    external_ids = models.JSONField(default=list)
    # The provider's own reason when it failed (or fedmem's, when it never answered).
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict)
    attempts = models.PositiveIntegerField(default=0)
    # The erasure a forget was issued for: its certificate reads the final answer.
    erasure_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    next_check_at = models.DateTimeField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    # restrict(): providers.selectors.restrict_provider_writes.
    objects = RestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "next_check_at"], name="provider_write_due"),
            models.Index(fields=["tenant", "engine", "-created_at"], name="provider_write_engine"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} on {self.engine_id}: {self.status}"
