"""What the wire tests of v1's successors (``tests/brokers/v2``, ``tests/brokers/eidhub``)
share: the return URLs django-eid hands their client, without v1's placeholders (these APIs
name the session themselves)."""

from __future__ import annotations

from django_eid.brokers import ReturnUrls

URLS = ReturnUrls(
    "https://shop.example/eid/return/r/success/",
    "https://shop.example/eid/return/r/abort/",
    "https://shop.example/eid/return/r/error/",
)
