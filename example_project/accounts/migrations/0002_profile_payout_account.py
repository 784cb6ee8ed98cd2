from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="profile",
            name="payout_account",
            field=models.CharField(blank=True, max_length=34, verbose_name="payout account"),
        ),
    ]
