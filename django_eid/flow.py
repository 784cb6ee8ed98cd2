"""The identification flow's public functions, where they have always been imported from.

The code lives in :mod:`django_eid.flows`, one module per use case; this module is the
stable import path for front ends and sites (``from django_eid import flow``;
``flow.start(...)``). The names here are bound to the functions of :mod:`django_eid.flows`:
a test that replaces one (``monkeypatch``) replaces it in the module that defines it, for
instance ``django_eid.flows.finish.complete``.
"""

from __future__ import annotations

from django_eid.flows.finish import (
    abort,
    cancel,
    complete,
    expire,
    expire_if_stale,
    fail,
    is_expired,
)
from django_eid.flows.link import linked_elsewhere, links_of, unlink
from django_eid.flows.login import account_to_log_in
from django_eid.flows.pending import FAILED_START_WINDOW, unfinished_count
from django_eid.flows.refused import Refused
from django_eid.flows.returns import (
    ABORT,
    ERROR,
    PLACEHOLDER_MAX,
    REFERENCE_RE,
    SUCCESS,
    Returned,
    callback_return,
    find,
    finished_elsewhere,
    retrieve,
    return_elsewhere,
    return_to,
    return_urls,
)
from django_eid.flows.settle import SETTLE_INTERVAL, Settled, settle, settle_if_due
from django_eid.flows.start import (
    NEXT_MAX_LENGTH,
    REQUEST_ID_MAX,
    BrokerFailed,
    Started,
    choose_provider,
    iframe_domain,
    offered_providers,
    safe_next,
    start,
)
from django_eid.models import Identification

#: The row's statuses and displays, as they were importable from here.
Status = Identification.Status
Display = Identification.Display

__all__ = [
    "ABORT",
    "ERROR",
    "FAILED_START_WINDOW",
    "NEXT_MAX_LENGTH",
    "PLACEHOLDER_MAX",
    "REFERENCE_RE",
    "REQUEST_ID_MAX",
    "SETTLE_INTERVAL",
    "SUCCESS",
    "BrokerFailed",
    "Display",
    "Refused",
    "Returned",
    "Settled",
    "Started",
    "Status",
    "abort",
    "account_to_log_in",
    "callback_return",
    "cancel",
    "choose_provider",
    "complete",
    "expire",
    "expire_if_stale",
    "fail",
    "find",
    "finished_elsewhere",
    "iframe_domain",
    "is_expired",
    "linked_elsewhere",
    "links_of",
    "offered_providers",
    "retrieve",
    "return_elsewhere",
    "return_to",
    "return_urls",
    "safe_next",
    "settle",
    "settle_if_due",
    "start",
    "unfinished_count",
    "unlink",
]
