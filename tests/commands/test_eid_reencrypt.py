"""Key rotation and ``manage.py eid_reencrypt``: data written under an old key reads once a
new key is put first, ``eid_reencrypt`` moves every row to the first key (proved by removing
the old key and reading again), ``--dry-run`` only counts, and a key removed too early is a
clear error. At scale (batches, resumed runs): ``test_batches.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import CommandError
from django.test import Client

from django_eid import crypto
from django_eid.models import Identification
from tests.commands.helpers import run
from tests.fixtures_broker import SSN
from tests.fixtures_views import Started, snapshot
from tests.models.stored import ciphertexts

pytestmark = pytest.mark.django_db

Status = Identification.Status
OLD, NEW, NEWER = (base64.urlsafe_b64encode(c * 32).decode() for c in (b"o", b"n", b"w"))


def make_rows(user: AbstractBaseUser, count: int, number: str = SSN) -> list[int]:
    return [
        Identification.objects.create(
            user=user, status=Status.SUCCESS, social_security_number=f"{number[:-2]}{i:02d}"
        ).pk
        for i in range(count)
    ]


@pytest.mark.parametrize("count", [1, 3, 7])
@pytest.mark.parametrize("first", ["explicit", "derived from SECRET_KEY"])
def test_rotation_reads_old_rows_and_reencrypt_moves_them_to_the_first_key(
    alice: AbstractBaseUser, eid: Callable[..., None], settings: Any, count: int, first: str
) -> None:
    old = OLD if first == "explicit" else crypto.derived_key(settings.SECRET_KEY)
    eid(ENCRYPTION_KEYS=[OLD] if first == "explicit" else None)
    pks = make_rows(alice, count)
    Identification.objects.create(user=alice)  # no number: never touched
    written = ciphertexts()
    eid(ENCRYPTION_KEYS=[NEW, old])  # the new key first, the old one still there
    assert [Identification.objects.get(pk=pk).social_security_number for pk in pks] == [
        f"{SSN[:-2]}{i:02d}" for i in range(count)
    ]
    assert Identification.objects.with_social_security_number(f"{SSN[:-2]}00").count() == 1
    assert (
        run("eid_reencrypt", "--dry-run")
        == f"{count} identification(s) are not under the first key.\n"
    )
    assert ciphertexts() == written  # a dry run writes nothing
    before = snapshot()
    assert run("eid_reencrypt", "--batch-size", "2") == (
        f"Re-encrypted {count} identification(s) under the first key.\n"
    )
    after = ciphertexts()
    # PostgreSQL returns updated rows in a new physical order: compare sets, not order.
    assert sorted(pk for pk in written if after[pk] != written[pk]) == sorted(pks)
    assert all(crypto.is_current(after[pk] or "") for pk in pks)
    assert {
        pk: {k: v for k, v in row.items() if k != "social_security_number_hash"}
        for pk, row in snapshot().items()
    } == {
        pk: {k: v for k, v in row.items() if k != "social_security_number_hash"}
        for pk, row in before.items()
    }
    eid(ENCRYPTION_KEYS=[NEW])  # the old key is gone: everything still reads, and is found
    assert Identification.objects.get(pk=pks[-1]).social_security_number == (
        f"{SSN[:-2]}{count - 1:02d}"
    )
    assert Identification.objects.with_social_security_number(f"{SSN[:-2]}00").count() == 1
    assert run("eid_reencrypt", "--dry-run").startswith("0 ")
    assert run("eid_reencrypt") == "Re-encrypted 0 identification(s) under the first key.\n"


def test_rows_under_several_old_keys_all_move(
    alice: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    eid(ENCRYPTION_KEYS=[OLD])
    first = make_rows(alice, 2)
    eid(ENCRYPTION_KEYS=[NEW, OLD])
    second = make_rows(alice, 3, number="01010100000")
    eid(ENCRYPTION_KEYS=[NEWER, NEW, OLD])
    assert run("eid_reencrypt", "--dry-run").startswith("5 ")
    run("eid_reencrypt")
    eid(ENCRYPTION_KEYS=[NEWER])
    assert (
        len({Identification.objects.get(pk=pk).social_security_number for pk in first + second})
        == 5
    )


def test_removing_a_key_too_early_is_a_clear_error(
    alice: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    eid(ENCRYPTION_KEYS=[OLD])
    (pk,) = make_rows(alice, 1)
    eid(ENCRYPTION_KEYS=[NEW])
    assert Identification.objects.get(pk=pk).has_unreadable_number  # read, not raised
    with pytest.raises(
        CommandError, match=rf"1 identification\(s\) cannot be decrypted .*ids: {pk}\)"
    ):
        run("eid_reencrypt")
    eid(ENCRYPTION_KEYS=[NEW, OLD])  # put it back: nothing was lost
    assert Identification.objects.get(pk=pk).social_security_number == f"{SSN[:-2]}00"


def test_a_flow_after_rotation_writes_under_the_new_key(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(ENCRYPTION_KEYS=[NEW, OLD], GET_SOCIAL_SECURITY_NUMBER=True)
    started = start(ends="success")
    alice_client.get(started.success_url())
    assert crypto.is_current(ciphertexts()[started.pk] or "")
    eid(ENCRYPTION_KEYS=[NEW])
    assert started.row.social_security_number == SSN


def test_kept_evidence_moves_to_the_first_key_with_the_numbers(
    alice: AbstractBaseUser, eid: Callable[..., None]
) -> None:
    """``KEEP_EVIDENCE``'s column is encrypted like the number: a rotation moves it too, each
    column on its own (a row with evidence only, one with both, one with the number only)."""
    eid(ENCRYPTION_KEYS=[OLD])
    evidence_only = Identification.objects.create(user=alice, evidence='{"id_token": "a.b.c"}')
    both = Identification.objects.create(
        user=alice, social_security_number=SSN, evidence='{"id_token": "d.e.f"}'
    )
    number_only = make_rows(alice, 1)[0]
    eid(ENCRYPTION_KEYS=[NEW, OLD])
    assert run("eid_reencrypt", "--dry-run") == (
        "2 identification(s) are not under the first key.\n"
        "The evidence of 2 identification(s) is not under it.\n"
    )
    assert run("eid_reencrypt") == (
        "Re-encrypted 2 identification(s) under the first key.\n"
        "Re-encrypted the evidence of 2 identification(s).\n"
    )
    eid(ENCRYPTION_KEYS=[NEW])  # the old key gone: everything still reads
    assert Identification.objects.get(pk=evidence_only.pk).evidence == '{"id_token": "a.b.c"}'
    row = Identification.objects.get(pk=both.pk)
    assert (row.social_security_number, row.evidence) == (SSN, '{"id_token": "d.e.f"}')
    assert Identification.objects.get(pk=number_only).social_security_number
    assert run("eid_reencrypt", "--dry-run") == "0 identification(s) are not under the first key.\n"
