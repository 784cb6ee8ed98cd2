"""A lost key degrades, it does not crash.

``SECRET_KEY`` rotated without moving the old one to ``SECRET_KEY_FALLBACKS`` (and
``ENCRYPTION_KEYS`` unset) leaves every stored national identity number undecryptable.
The rows still answer: the gates and pages work without the number, a same-person gate
never takes an unreadable number for a match, saving such a row keeps its ciphertext,
``eid_purge`` deletes and anonymizes it, the admin says what is wrong, ``eid_check`` names
the rows (never a number) and ``eid_reencrypt`` refuses to rewrite what it cannot read.
Putting the old key back makes everything readable again.
"""

from __future__ import annotations

import datetime
from io import StringIO
from typing import Any

import pytest
import responses
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from django_eid import crypto
from django_eid.models import Identification, PersonClaim
from tests.commands.helpers import run
from tests.fixtures_client import SettingsWrapper, add_token, eid_settings_with
from tests.fixtures_views import logged_in, without_planner_estimate
from tests.models.stored import stored_numbers

pytestmark = pytest.mark.django_db

Status = Identification.Status
OLD_SECRET, NEW_SECRET = "the-old-secret-key-" + "o" * 40, "the-new-secret-key-" + "n" * 40
KARI, OLA = "31127112345", "01018512345"


def make(user: Any, number: str | None, *, uid: str, minutes_ago: int = 0, **kw: Any) -> int:
    """A verified identification of ``user`` holding ``number``; its pk."""
    completed = timezone.now() - datetime.timedelta(minutes=minutes_ago)
    return Identification.objects.create(
        user=user,
        status=kw.pop("status", Status.SUCCESS),
        identity_provider="NO_BANKID_WEB",
        identity_provider_unique_id=uid,
        name="Nordmann, Kari",
        social_security_number=number,
        created_at=completed,
        completed_at=completed,
        **kw,
    ).pk


@pytest.fixture
def under_old_secret(settings: SettingsWrapper) -> None:
    """What follows is written under the key derived from ``OLD_SECRET``."""
    settings.DJANGO_EID = eid_settings_with(ENCRYPTION_KEYS=None)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD_SECRET, []


def lose_the_key(settings: SettingsWrapper) -> None:
    """``SECRET_KEY`` rotated, the old one not kept as a fallback."""
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET, []


@pytest.fixture
def kari(django_user_model: Any, under_old_secret: None) -> Any:
    return django_user_model.objects.create_user("kari")


@pytest.fixture
def lost(kari: Any, settings: SettingsWrapper) -> int:
    """Kari's verified identification, whose number no configured key decrypts; its pk."""
    pk = make(kari, KARI, uid="kari-uid", minutes_ago=1)
    lose_the_key(settings)
    return pk


# -- the model ------------------------------------------------------------------------------------
def test_verified_for_answers_without_the_number(kari: Any, lost: int) -> None:
    row = Identification.objects.verified_for(kari, max_age=300)
    assert row is not None
    assert row.pk == lost
    assert Identification.objects.latest_verified(kari) == row
    assert row.masked_social_security_number == ""
    assert row.has_unreadable_number


def test_an_unreadable_number_is_an_explicit_value_never_equal_to_anything(lost: int) -> None:
    from django_eid.crypto import Unreadable

    row = Identification.objects.get(pk=lost)
    number = row.social_security_number
    assert isinstance(number, Unreadable)
    assert not number  # "no number known" to code that asks `if row.social_security_number`
    again = Identification.objects.get(pk=lost).social_security_number
    assert number != again  # two unreadable numbers are not the same person
    assert number != KARI
    assert number != ""
    assert number is not None
    stored, _ = stored_numbers()[lost]
    for shown in (repr(number), str(number), f"{number}"):
        assert KARI not in shown
        assert (stored or "") not in shown


def test_saving_an_unreadable_row_keeps_its_ciphertext_and_hash(lost: int) -> None:
    before = stored_numbers()[lost]
    row = Identification.objects.get(pk=lost)
    row.name = "Nordmann, Kari Ann"
    row.save()
    row.save(update_fields=["social_security_number", "name"])
    assert stored_numbers()[lost] == before
    # Validation (a form, full_clean()) must not turn it into a blank that is then saved.
    others = [f.name for f in Identification._meta.fields if f.name != "social_security_number"]
    row.clean_fields(exclude=others)
    row.save()
    assert stored_numbers()[lost] == before
    reloaded = Identification.objects.defer("social_security_number").get(pk=lost)
    reloaded.error_message = "touched"
    reloaded.save()
    assert stored_numbers()[lost] == before


def test_the_old_key_put_back_reads_everything_again(lost: int, settings: SettingsWrapper) -> None:
    row = Identification.objects.get(pk=lost)
    row.save()  # saved while unreadable: nothing is lost
    settings.SECRET_KEY_FALLBACKS = [OLD_SECRET]
    again = Identification.objects.get(pk=lost)
    assert again.social_security_number == KARI
    assert not again.has_unreadable_number
    assert Identification.objects.with_social_security_number(KARI).get().pk == lost


def test_an_unreadable_number_cannot_be_dumped_as_a_blank(lost: int) -> None:
    """``dumpdata`` would write a value that ``loaddata`` stores as "no number"."""
    with pytest.raises(CommandError, match=f"identification {lost}: no configured key"):
        call_command("dumpdata", "django_eid.identification", stdout=StringIO())


# -- the pages and the gates --------------------------------------------------------------------
def test_the_result_page_works_without_the_number(kari: Any, settings: SettingsWrapper) -> None:
    success = Identification.objects.get(pk=make(kari, KARI, uid="kari-uid"))
    rejected = Identification.objects.get(
        pk=make(kari, KARI, uid="kari-uid", status=Status.REJECTED, error_code="NOT_SAME_PERSON")
    )
    lose_the_key(settings)
    client = logged_in(kari)
    assert client.get(reverse("django_eid:result", args=[success.reference])).status_code == 302
    page = client.get(reverse("django_eid:result", args=[rejected.reference]))
    assert page.status_code == 200
    assert "This is not the person verified on this account." in page.content.decode()


def test_a_plain_gate_opens_without_the_number(kari: Any, lost: int) -> None:
    response = logged_in(kari).get("/gated/any/")
    assert response.status_code == 200
    assert response.content == b"verified"


def test_a_same_person_gate_opens_for_the_row_that_is_the_account_person(
    kari: Any, lost: int
) -> None:
    assert logged_in(kari).get("/gated/payout/").content == b"payout form"


def test_a_same_person_gate_never_takes_unreadable_numbers_for_a_match(
    kari: Any, settings: SettingsWrapper
) -> None:
    # Under the old key: the account's person, then a later verification with another
    # provider id. Only the numbers could tell whether it is the same person; they are lost.
    make(kari, KARI, uid="kari-uid", minutes_ago=60)
    make(kari, OLA, uid="someone-else", minutes_ago=1)
    lose_the_key(settings)
    response = logged_in(kari).get("/gated/payout/")
    assert response.status_code == 302
    assert response["Location"].startswith("/eid/start/")


def test_a_same_person_gate_refuses_a_readable_number_against_an_unreadable_one(
    kari: Any, settings: SettingsWrapper
) -> None:
    make(kari, KARI, uid="kari-uid", minutes_ago=60)  # the account's person, old key
    lose_the_key(settings)
    make(kari, KARI, uid="another-uid", minutes_ago=1)  # the same number, new key
    assert logged_in(kari).get("/gated/payout/").status_code == 302


def test_the_admin_list_and_change_page_say_what_is_wrong(
    kari: Any, lost: int, django_user_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = logged_in(admin)
    without_planner_estimate(monkeypatch)
    listing = client.get(reverse("admin:django_eid_identification_changelist"))
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 1
    detail = client.get(reverse("admin:django_eid_identification_change", args=[lost]))
    assert detail.status_code == 200
    assert "(cannot be decrypted with the configured keys)" in detail.content.decode()


# -- the commands ---------------------------------------------------------------------------------
def test_eid_purge_deletes_unreadable_rows(kari: Any, settings: SettingsWrapper) -> None:
    pk = make(kari, KARI, uid="kari-uid", minutes_ago=200 * 24 * 60)
    PersonClaim.objects.create(key="ssn:" + "0" * 64, identification_id=pk)
    lose_the_key(settings)
    out = StringIO()
    call_command("eid_purge", "--older-than", "90d", stdout=out)
    assert "Deleted 1 finished identification(s)" in out.getvalue()
    assert not Identification.objects.exists()
    assert not PersonClaim.objects.exists()


def test_eid_purge_anonymizes_unreadable_rows(kari: Any, settings: SettingsWrapper) -> None:
    pk = make(kari, KARI, uid="kari-uid", minutes_ago=200 * 24 * 60)
    lose_the_key(settings)
    out = StringIO()
    call_command("eid_purge", "--older-than", "90d", "--anonymize", stdout=out)
    assert "Anonymized 1 finished identification(s)" in out.getvalue()
    assert stored_numbers()[pk] == (None, None)


def test_eid_reencrypt_refuses_what_it_cannot_read_and_moves_the_rest(
    kari: Any, settings: SettingsWrapper
) -> None:
    unreadable = [make(kari, KARI, uid=f"old-{i}") for i in range(2)]
    # A second key that is kept: its row is readable and moves to the first key.
    settings.SECRET_KEY = "a-kept-secret-key-" + "k" * 40
    readable = make(kari, OLA, uid="kept")
    lose_the_key(settings)
    settings.SECRET_KEY_FALLBACKS = ["a-kept-secret-key-" + "k" * 40]
    before = stored_numbers()
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("eid_reencrypt", stdout=out)
    message = str(info.value)
    assert "2 identification(s) cannot be decrypted" in message
    assert f"{unreadable[0]}, {unreadable[1]}" in message
    assert "SECRET_KEY_FALLBACKS" in message
    assert "ENCRYPTION_KEYS" in message
    assert KARI not in message + out.getvalue()
    after = stored_numbers()
    assert [after[pk] for pk in unreadable] == [before[pk] for pk in unreadable]  # untouched
    assert after[readable] != before[readable]
    assert crypto.is_current(after[readable][0] or "")
    assert "Re-encrypted 1 identification(s)" in out.getvalue()

    with pytest.raises(CommandError, match="2 identification"):
        call_command("eid_reencrypt", "--dry-run", stdout=StringIO())
    assert stored_numbers() == after

    settings.SECRET_KEY_FALLBACKS = [OLD_SECRET]  # the lost key found again
    assert "Re-encrypted 2 identification(s)" in run("eid_reencrypt")
    settings.SECRET_KEY_FALLBACKS = []
    assert [Identification.objects.get(pk=pk).social_security_number for pk in unreadable] == [
        KARI,
        KARI,
    ]


def test_eid_check_names_the_unreadable_rows_and_fails(
    kari: Any, lost: int, wire: responses.RequestsMock
) -> None:
    add_token(wire, "tok-check", expires_in=3600)
    readable = make(kari, OLA, uid="new")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as info:
        call_command("eid_check", stdout=out, stderr=err)
    message = str(info.value)
    assert "1 identification(s)" in message
    assert f"ids: {lost}" in message
    assert str(readable) not in message.split("ids:")[1]
    assert "SECRET_KEY_FALLBACKS" in message
    assert "ENCRYPTION_KEYS" in message
    for text in (message, out.getvalue(), err.getvalue()):
        assert KARI not in text
        assert OLA not in text
    assert "OK: the broker issued an access token." in out.getvalue()  # the broker check ran


def test_eid_check_is_quiet_when_every_number_reads(
    kari: Any, wire: responses.RequestsMock, settings: SettingsWrapper
) -> None:
    make(kari, KARI, uid="kari-uid")
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET, [OLD_SECRET]
    add_token(wire, "tok-check", expires_in=3600)
    out = StringIO()
    call_command("eid_check", stdout=out, stderr=StringIO())
    assert "Stored national identity numbers: 1, all readable" in out.getvalue()
