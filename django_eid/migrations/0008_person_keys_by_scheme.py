"""Re-key the ``uid:`` person claims by the provider's eID scheme, not its name.

A claim's key was the SHA-256 of ``[provider name, unique id]``; it is now that of
``[eID scheme, unique id]`` (``django_eid.person_keys.uid_key``), so that one person's NO BankID
PID is one key under every broker API (``NO_BANKID_WEB``, ``no_bankid_mobile``, ``nbid``).
Claims are re-keyed in batches of ``BATCH`` in the order they were written; where two claims
now share a key (the same person held by two accounts under two spellings of the
provider), the one written first stands and the other is dropped, as ``claims.rekey``
does for number keys (``ONE_ACCOUNT_PER_PERSON``'s query still sees both rows).
"""

from django.db import migrations

BATCH = 1000


def rekey_by_scheme(apps, schema_editor):
    from django_eid.person_keys import uid_key_of

    PersonClaim = apps.get_model("django_eid", "PersonClaim")
    db = schema_editor.connection.alias
    claims = (
        PersonClaim.objects.using(db).filter(key__startswith="uid:").select_related("identification")
    )
    taken = set()
    last = None
    while True:
        batch = claims if last is None else claims.filter(pk__gt=last)
        page = list(batch.order_by("pk")[:BATCH])
        if not page:
            break
        last = page[-1].pk
        for claim in page:
            row = claim.identification
            key = uid_key_of(row.identity_provider, row.identity_provider_unique_id)
            if key is None or key == claim.key:
                taken.add(claim.key)
                continue
            if key in taken or PersonClaim.objects.using(db).filter(key=key).exists():
                claim.delete()
                continue
            claim.key = key
            claim.save(update_fields=["key"])
            taken.add(key)


class Migration(migrations.Migration):
    dependencies = [
        ("django_eid", "0007_level_of_assurance"),
    ]

    operations = [
        migrations.RunPython(rekey_by_scheme, migrations.RunPython.noop, elidable=True),
    ]
