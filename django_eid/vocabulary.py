"""The broker's vocabulary: its paths, placeholders, statuses, languages and provider names.

Everything the identification service's wire format names lives here, once: the
client builds its requests from it, the parser and the flow read its statuses, the
settings checks validate against it, and the sandbox answers with it. Nothing in
this module talks HTTP or touches the database.
"""

from __future__ import annotations

import re
from typing import Final

# -- endpoints (relative to AUTH_URL and BASE_URL) ------------------------------------
#: ``POST {auth_url}`` + this: the OAuth 2.0 client-credentials token endpoint.
TOKEN_PATH: Final = "/oauth/connect/token"  # noqa: S105  (a path, not a password)
#: ``POST`` creates a session, ``GET ?requestId=`` retrieves its record.
SESSION_PATH: Final = "/identification/session"
#: ``GET ?requestId=``: whether a session is finished, ``{"Done": bool}``, without personal data.
STATUS_PATH: Final = SESSION_PATH + "/status"
#: The property of the status answer.
DONE: Final = "Done"
#: ``PUT`` with ``{"RequestId": ...}`` ends a session: its record becomes ``INVALIDATED``.
INVALIDATE_PATH: Final = SESSION_PATH + "/invalidate"
#: The property of the invalidate request naming the session.
INVALIDATE_REQUEST_ID: Final = "RequestId"
#: Query parameter of a retrieval naming the session.
REQUEST_ID_PARAM: Final = "requestId"
#: Query parameter asking a retrieval for add-on data (``MetaData``) too.
METADATA_PARAM: Final = "metaData"
#: The scopes the interface document defines; identification needs ``identify``.
SCOPES: Final = frozenset({"document_read", "document_write", "document_file", "event", "identify"})

# -- the return URLs ----------------------------------------------------------------------
#: Placeholders the broker fills in the return URLs (the brackets must reach it unencoded).
ERROR_STATUS: Final = "[0]"
REQUEST_ID: Final = "[1]"
EXTERNAL_ID: Final = "[2]"
#: Query parameters of django-eid's return URLs that carry the placeholders.
RETURN_REQUEST_ID: Final = "requestId"
RETURN_EXTERNAL_ID: Final = "externalId"
RETURN_ERROR_STATUS: Final = "status"
#: Every query parameter of the return URLs that the broker fills.
RETURN_PARAMS: Final = (RETURN_REQUEST_ID, RETURN_EXTERNAL_ID, RETURN_ERROR_STATUS)
#: What the Success and Abort URLs append to carry ``[2]`` back. The broker's request id
#: (``[1]``) is left out: it is personal data to ``eid_purge``, and a URL lands in access
#: logs and browser history; django-eid's reference (in the path) and external id suffice.
IDS_QUERY: Final = f"?{RETURN_EXTERNAL_ID}={EXTERNAL_ID}"
#: What the Error URL appends to carry ``[0]`` back, and ``[2]`` (the deployed service
#: fills it there too) to bind the error to the session.
ERROR_QUERY: Final = f"?{RETURN_ERROR_STATUS}={ERROR_STATUS}&{RETURN_EXTERNAL_ID}={EXTERNAL_ID}"

# -- session statuses of a retrieved record ---------------------------------------------
SUCCESS: Final = "SUCCESS"
CREATED: Final = "CREATED"
USER_INITIATED: Final = "USERINITIATED"
USER_ABORTED: Final = "USERABORTED"
ERROR: Final = "ERROR"
TIMEOUT: Final = "TIMEOUT"
INVALIDATED: Final = "INVALIDATED"
UNKNOWN: Final = "UNKNOWN"
#: Record statuses that mean "the user is still at the broker".
IN_PROGRESS: Final = frozenset({CREATED, USER_INITIATED})
#: Final statuses that mean "no identity": the user cancelled, or the session failed.
UNSUCCESSFUL: Final = frozenset({USER_ABORTED, ERROR, TIMEOUT, INVALIDATED, UNKNOWN})

# -- languages ------------------------------------------------------------------------------
#: The broker's ``Language`` codes.
LANGUAGES: Final = ("NO", "EN", "SV", "DA", "FI")
#: Broker ``Language`` code for each Django language code it covers (others: EN).
DJANGO_TO_BROKER_LANGUAGE: Final = {
    "nb": "NO",
    "nn": "NO",
    "no": "NO",
    "sv": "SV",
    "da": "DA",
    "fi": "FI",
}
#: Django language code for each broker ``Language`` code (the sandbox renders in it).
BROKER_TO_DJANGO_LANGUAGE: Final = {"NO": "nb", "EN": "en", "SV": "sv", "DA": "da", "FI": "fi"}


def broker_language(django_language: str | None) -> str:
    """The broker's ``Language`` for a Django language code (``nb-no`` -> ``NO``; else ``EN``)."""
    code = (django_language or "en").lower().split("-")[0]
    return DJANGO_TO_BROKER_LANGUAGE.get(code, "EN")


# -- identity providers ----------------------------------------------------------------------
#: Upper-case words joined by underscores, as the interface document describes.
PROVIDER_RE: Final = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*\Z")
#: The providers of the public reference: its request enum, and ``FI_MOBIILIVARMENNE`` of one
#: SDK (the list is open: any name of the shape is accepted).
PROVIDERS: Final = (
    "NO_BANKID_WEB",
    "NO_BANKID_MOBILE",
    "NO_BUYPASS",
    "SWE_BANKID",
    "SWE_BANKID_MOBILE",
    "DA_NEMID",
    "FI_TUPAS",
    "FI_MOBIILIVARMENNE",
)
#: What a record names as its provider when the broker does not know it (never a request's).
UNKNOWN_PROVIDER: Final = "UNKNOWN"
#: Providers whose records carry no ``IdentityProviderUniqueId`` (Swedish BankID has none).
WITHOUT_UNIQUE_ID: Final = frozenset({"SWE_BANKID", "SWE_BANKID_MOBILE"})
#: The country of a provider's persons, by the prefix of its name.
_PROVIDER_COUNTRIES: Final = {
    "NO": "NO",
    "SWE": "SE",
    "SE": "SE",
    "DA": "DK",
    "DK": "DK",
    "FI": "FI",
}


def provider_country(provider: str | None) -> str | None:
    """The ISO country whose eID ``provider`` is (``SWE_BANKID`` -> ``SE``), or ``None``."""
    if not provider:
        return None
    return _PROVIDER_COUNTRIES.get(provider.split("_", 1)[0])
