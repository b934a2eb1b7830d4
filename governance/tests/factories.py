from __future__ import annotations

import itertools

import factory

from governance.models import Agent, Membership, Role, Tenant, User
from governance.services.agents import agent_create, api_key_create


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.Sequence(lambda n: f"Tenant {n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Role.DEVELOPER


def member(tenant: Tenant, role: str = Role.DEVELOPER, **kwargs) -> User:
    user = UserFactory(**kwargs)
    MembershipFactory(user=user, tenant=tenant, role=role)
    return user


_agent_numbers = itertools.count(1)


def agent(tenant: Tenant, owner: User | None = None, name: str | None = None) -> Agent:
    return agent_create(tenant=tenant, name=name or f"agent-{next(_agent_numbers)}", created_by=owner)


def agent_key(a: Agent) -> str:
    _, secret = api_key_create(tenant=a.tenant, agent=a, name="test")
    return secret


def user_key(user: User, tenant: Tenant) -> str:
    _, secret = api_key_create(tenant=tenant, user=user, name="test")
    return secret
