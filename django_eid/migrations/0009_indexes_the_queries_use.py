"""Keep only the indexes the app's queries use (docs/reference/models.md, "Indexes").

On PostgreSQL, a ``unique=True`` or ``db_index=True`` CharField also gets a
``varchar_pattern_ops`` twin for LIKE queries; none of django-eid's queries is one, and at a
million rows they were half the table's index size. The unique keys become Meta constraints
(one index each); ``external_id`` (never looked up), ``status`` and ``user`` alone (covered by
the ``(user, status)`` index) lose theirs; the person lookups get partial indexes of the rows
they search. PostgreSQL rebuilds three unique indexes here: a few seconds per million rows,
during which writes to the table wait.
"""

import django.db.models.deletion
import django_eid.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_eid", "0008_person_keys_by_scheme"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="identification",
            name="external_id",
            field=models.CharField(
                default=django_eid.models.new_external_id,
                editable=False,
                max_length=64,
                verbose_name="external id",
            ),
        ),
        migrations.AlterField(
            model_name="identification",
            name="identity_provider_unique_id",
            field=models.CharField(
                blank=True, max_length=255, verbose_name="unique id at the provider"
            ),
        ),
        migrations.AlterField(
            model_name="identification",
            name="reference",
            field=models.CharField(
                default=django_eid.models.new_reference,
                editable=False,
                max_length=64,
                verbose_name="reference",
            ),
        ),
        migrations.AlterField(
            model_name="identification",
            name="request_id",
            field=models.CharField(
                blank=True, max_length=512, null=True, verbose_name="broker request id"
            ),
        ),
        migrations.AlterField(
            model_name="identification",
            name="social_security_number_hash",
            field=models.CharField(blank=True, editable=False, max_length=64, null=True),
        ),
        migrations.AlterField(
            model_name="identification",
            name="status",
            field=models.CharField(
                choices=[
                    ("PENDING", "Pending"),
                    ("SUCCESS", "Identified"),
                    ("ABORTED", "Aborted"),
                    ("ERROR", "Failed"),
                    ("EXPIRED", "Expired"),
                    ("REJECTED", "Rejected"),
                ],
                default="PENDING",
                max_length=16,
                verbose_name="status",
            ),
        ),
        migrations.AlterField(
            model_name="identification",
            name="user",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="eid_identifications",
                to=settings.AUTH_USER_MODEL,
                verbose_name="user",
            ),
        ),
        migrations.AlterField(
            model_name="personclaim",
            name="key",
            field=models.CharField(editable=False, max_length=68, verbose_name="person key"),
        ),
        migrations.AddIndex(
            model_name="identification",
            index=models.Index(
                condition=models.Q(("status", "SUCCESS")),
                fields=["identity_provider_unique_id"],
                name="django_eid_verified_uid",
            ),
        ),
        migrations.AddIndex(
            model_name="identification",
            index=models.Index(
                condition=models.Q(("social_security_number_hash__isnull", False)),
                fields=["social_security_number_hash"],
                name="django_eid_number_hash",
            ),
        ),
        migrations.AddConstraint(
            model_name="identification",
            constraint=models.UniqueConstraint(
                fields=("reference",), name="django_eid_reference_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="identification",
            constraint=models.UniqueConstraint(
                fields=("request_id",), name="django_eid_request_id_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="personclaim",
            constraint=models.UniqueConstraint(fields=("key",), name="django_eid_claim_key_unique"),
        ),
    ]
