from .agents import Agent, ApiKey
from .jobs import Job
from .policies import AgentPolicyVersion
from .tenancy import Membership, Role, Tenant, User

__all__ = ["Agent", "AgentPolicyVersion", "ApiKey", "Job", "Membership", "Role", "Tenant", "User"]
