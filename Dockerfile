# One image for every role: web (default), worker, beat, migrate.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    FEDMEM_DATA_DIR=/app/var FEDMEM_STATIC_ROOT=/app/staticfiles \
    DJANGO_SETTINGS_MODULE=fedmem_site.settings.base

RUN apt-get update && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 fedmem

WORKDIR /app
COPY pyproject.toml README.md ./
COPY fedmem_site fedmem_site
COPY core core
COPY governance governance
COPY memory memory
COPY providers providers
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
    && pip install .
COPY manage.py ./
COPY templates templates
COPY static static

# collectstatic needs settings but no database: a placeholder URL is never connected to.
RUN DATABASE_URL=postgres://build/none FEDMEM_SECRET_KEY=collectstatic-only \
    python manage.py collectstatic --noinput \
    && mkdir -p /app/var && chown -R fedmem /app/var

USER fedmem
EXPOSE 8000
ENV FEDMEM_ENV=production
CMD ["python", "-m", "fedmem_site.serve", "-b", "0.0.0.0", "-p", "8000", "fedmem_site.asgi:application"]
