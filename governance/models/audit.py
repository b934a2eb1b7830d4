from __future__ import annotations

from django.db import models


class AuditEvent(models.Model):
    """One entry of the append-only, hash-chained audit trail.

    No foreign keys: the trail outlives the users, agents and tenants it names.
    The database refuses UPDATE and DELETE on this table (trigger in the
    migration); each row's ``hash`` covers its content and the previous row's hash
    in the same chain (one chain per tenant, plus the platform chain), keyed with
    FEDMEM_AUDIT_KEY (outside the database), so editing or removing a row breaks
    verification from that row on, even for someone who can bypass the trigger. Payloads never hold
    memory content or subjects in clear — services pass hashes.
    """

    chain = models.CharField(max_length=64, db_index=True, help_text="tenant id, or 'platform'")
    seq = models.PositiveBigIntegerField(help_text="position in the chain, from 1")
    tenant_id = models.UUIDField(null=True, blank=True, db_index=True)
    actor_type = models.CharField(max_length=16)  # user | agent | system
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["chain", "seq"], name="audit_chain_seq_unique")]
        indexes = [models.Index(fields=["tenant_id", "-created_at"], name="audit_tenant_time")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor_label}"


class AuditChainHead(models.Model):
    """The last link of each chain, so removing rows from the end is detected too;
    ``mac`` (keyed) means the head cannot be moved back without the audit key."""

    chain = models.CharField(max_length=64, primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)
    mac = models.CharField(max_length=64, default="")

    def __str__(self) -> str:
        return f"{self.chain} @ {self.seq}"
