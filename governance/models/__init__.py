from .agents import Agent, ApiKey
from .jobs import Job
from .tenancy import Membership, Role, Tenant, User

__all__ = ["Agent", "ApiKey", "Job", "Membership", "Role", "Tenant", "User"]
