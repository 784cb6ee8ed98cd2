"""The admin's provider filter (docs/reference/models.md, "Indexes").

It lists a provider's rows newest first and counts them up to a limit; no index has the
provider, so a provider with few rows (or none) made PostgreSQL read the whole table,
seconds at a million rows. ``(identity_provider, created_at)`` serves both, and the date
filter within it. (The status filter needs none: the ``(user, status)`` index is read in
full instead of the table, tens of milliseconds per million rows.) PostgreSQL builds it
with a plain ``CREATE INDEX``, which holds writes to the table while it reads it (a few
seconds per million rows): apply it at a quiet time.
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
            index=models.Index(
                fields=["identity_provider", "created_at"], name="django_eid_provider_created"
            ),
        ),
    ]
