"""The admin of linked identities: listed and removable by staff, never made or edited by
hand, the person's key never shown."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification, LinkedIdentity

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_eid/linkedidentity/"


def test_staff_list_find_and_remove_a_link_but_never_see_its_key(
    verify: Callable[..., Identification],
    superuser_client: Client,
    alice: AbstractBaseUser,
    bob_client: Client,
) -> None:
    verify()
    verify(client=bob_client, IdentityProviderUniqueId="bobs-id")
    alices = LinkedIdentity.objects.get(user=alice)
    page = superuser_client.get(CHANGELIST)
    assert page.status_code == 200
    assert {link.pk for link in page.context["cl"].result_list} == set(
        LinkedIdentity.objects.values_list("pk", flat=True)
    )
    found = superuser_client.get(CHANGELIST, {"q": "alice"})
    assert [link.pk for link in found.context["cl"].result_list] == [alices.pk]
    detail = superuser_client.get(f"{CHANGELIST}{alices.pk}/change/")
    assert detail.status_code == 200
    for page_html in (page.content.decode(), detail.content.decode()):
        assert alices.key not in page_html
        assert alices.key[4:20] not in page_html
    assert superuser_client.get(f"{CHANGELIST}add/").status_code == 403
    removed = superuser_client.post(f"{CHANGELIST}{alices.pk}/delete/", {"post": "yes"})
    assert removed.status_code == 302
    assert not LinkedIdentity.objects.filter(pk=alices.pk).exists()
    assert LinkedIdentity.objects.count() == 1
