"""Tenants, users and memberships."""

from __future__ import annotations

from django.db import transaction

from governance.models import Membership, Role, Tenant, User


@transaction.atomic
def tenant_get_or_create(*, slug: str, name: str) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    return tenant


@transaction.atomic
def membership_grant(*, user: User, tenant: Tenant, role: str) -> Membership:
    membership, _ = Membership.objects.get_or_create(user=user, tenant=tenant, role=Role(role))
    return membership
