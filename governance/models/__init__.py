from .agents import Agent, ApiKey
from .audit import AuditChainHead, AuditEvent
from .candidates import Candidate
from .erasure import ErasureFence, ErasureRequest
from .holds import LegalHold
from .jobs import Job
from .policies import AgentPolicyVersion
from .tenancy import Membership, Role, Tenant, User

__all__ = [
    "Agent",
    "AgentPolicyVersion",
    "ApiKey",
    "AuditChainHead",
    "AuditEvent",
    "Candidate",
    "ErasureFence",
    "ErasureRequest",
    "Job",
    "LegalHold",
    "Membership",
    "Role",
    "Tenant",
    "User",
]
