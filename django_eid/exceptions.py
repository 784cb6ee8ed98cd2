"""Exceptions raised by django-eid.

Everything a broker call can raise at runtime is an :class:`EidError`; a site can
catch that one type. A broken configuration is an :class:`EidConfigurationError`,
an :class:`~django.core.exceptions.ImproperlyConfigured`, deliberately *not* an
``EidError``: a handler written for broker outages must not swallow it.

Messages say which call failed and what came back. They never contain the client
secret, an access token or a national identity number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured


class EidConfigurationError(ImproperlyConfigured):
    """``settings.DJANGO_EID`` is missing something or holds an invalid value."""


class EidError(Exception):
    """Root of every runtime error of django-eid."""


class TokenError(EidError):
    """The token endpoint refused to issue an access token.

    ``error`` is the RFC 6749 error code (``invalid_client`` ...) when the broker sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        error: str | None = None,
        description: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.error = error
        self.description = description
        self.status_code = status_code


class InvalidScope(TokenError):
    """The client is not set up for one of the requested scopes (``invalid_scope``)."""


class InvalidClient(TokenError):
    """The client id or secret was not accepted (``invalid_client``)."""


class EidApiError(EidError):
    """The broker answered an API call with an HTTP error status.

    ``status_code`` is the HTTP status, ``body`` the parsed error body (a dict)
    when it was JSON, and ``broker_request_id`` the broker's request-id header
    when it sent one (quote it to the broker's support).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: Mapping[str, Any] | None = None,
        broker_request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.broker_request_id = broker_request_id


class EidUnavailable(EidError):
    """The broker could not be reached in time: timeout, connection failure, 5xx after retries."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class EidProtocolError(EidError):
    """A 2xx answer that is not the JSON the contract promises."""


class IdTokenInvalid(EidProtocolError):
    """An OpenID provider's ``id_token`` (or signed userinfo) failed validation: its
    signature, algorithm, issuer, audience, lifetime, nonce or required claims."""


class BindRefused(EidError):
    """:func:`django_eid.bind_pending_identification` did not bind: ``code`` says why
    (``nothing_to_bind``: none verified in this browser, bound already or too old;
    ``person_has_account``: the person's eID is linked to another account)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class EvidenceError(EidError):
    """An identification's kept evidence (``KEEP_EVIDENCE``) does not verify:
    :func:`django_eid.evidence.verify`. ``code`` says what failed (``not_found``,
    ``no_evidence``, ``unreadable``, ``unknown_key``, ``signature_invalid``,
    ``issuer_mismatch``, ``subject_mismatch``, ``audience_mismatch``, ``time_mismatch``,
    ``nonce_mismatch``); the message never holds the token or personal data."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class IdentificationRejected(Exception):
    """Raise from an ``identification_verifying`` receiver to refuse the identity.

    The identification is stored with status ``REJECTED`` and ``str(exc)`` as the
    reason, which the user is shown. Example: ``raise IdentificationRejected(
    "You must be 18 or older.")``.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidNationalIdentityNumber(EidError, ValueError):
    """A national identity number that its country's rules refuse (:mod:`django_eid.national_id`).

    Wrong length or characters, check digits that do not match, a date of birth that is not on
    the calendar or is in the future, an unknown country code, or a number valid in more than
    one country when none was given. The message names the country and the fault
    ("Norwegian number: the check digits do not match.") and contains no digit of the input.
    It is also a ``ValueError``, so form and model validation code can catch it as one.
    """
