import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
application = get_wsgi_application()

from providers.apps import start_warmup  # noqa: E402

start_warmup(models="web")
