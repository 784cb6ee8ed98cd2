import django.contrib.auth.models
from django.db import migrations


class Migration(migrations.Migration):
    initial = True

    dependencies = [("auth", "0012_alter_user_first_name_max_length")]

    operations = [
        migrations.CreateModel(
            name="Customer",
            fields=[],
            options={"proxy": True, "indexes": [], "constraints": []},
            bases=("auth.user",),
            managers=[("objects", django.contrib.auth.models.UserManager())],
        ),
    ]
