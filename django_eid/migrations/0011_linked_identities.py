"""Linked identities: an account's lasting link to a person at an eID scheme.

A new table; nothing else changes. The accounts verified before this release get their links
from ``python manage.py eid_link`` (the upgrade notes say when to run it).
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_eid', '0010_admin_provider_index'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='LinkedIdentity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(editable=False, max_length=68, verbose_name='person key')),
                ('scheme', models.CharField(editable=False, max_length=64, verbose_name='eID scheme')),
                ('provider', models.CharField(editable=False, max_length=64, verbose_name='identity provider')),
                ('linked_at', models.DateTimeField(default=django.utils.timezone.now, editable=False, verbose_name='linked at')),
                ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True, verbose_name='last used at')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='eid_links', to=settings.AUTH_USER_MODEL, verbose_name='user')),
            ],
            options={
                'verbose_name': 'linked identity',
                'verbose_name_plural': 'linked identities',
                'ordering': ('linked_at', 'pk'),
                'constraints': [models.UniqueConstraint(fields=('key',), name='django_eid_link_key_unique')],
            },
        ),
    ]
