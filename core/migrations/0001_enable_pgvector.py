from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """Enable pgvector; the memory app's vector columns depend on this migration."""

    initial = True
    dependencies: list = []
    operations = [VectorExtension()]
