"""The admin's status and provider filters (docs/reference/models.md, "Indexes").

Each lists a value's rows newest first and counts them up to a limit; without an index
that starts with the value, a rare status (or a provider without rows) makes PostgreSQL
read the whole table, seconds at a million rows. ``(status, created_at)`` and
``(identity_provider, created_at)`` serve both, and the date filter within them. PostgreSQL
builds them with a plain ``CREATE INDEX``, which holds writes to the table while it reads
it (a few seconds per million rows): apply it at a quiet time.
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_eid", "0009_indexes_the_queries_use"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="identification",
            index=models.Index(fields=["status", "created_at"], name="django_eid_status_created"),
        ),
        migrations.AddIndex(
            model_name="identification",
            index=models.Index(
                fields=["identity_provider", "created_at"], name="django_eid_provider_created"
            ),
        ),
    ]
