"""The broker's APIs: one module per API, behind one interface, :class:`BrokerApi`.

A broker API is the one place that knows its wire format: the paths of its calls, the
request bodies, how the user comes back (placeholders filled in the return URLs, or a
query parameter appended to them), how a session's record reads, how its errors read,
how a session is cancelled, and whether a cheap "is it done" call exists. The flow core,
the views, the JSON API and the commands use only this interface and the typed records of
:mod:`django_eid.records`.

:class:`~django_eid.client.EidClient` owns the transport, the access token and the error
types; it hands each call to the :class:`BrokerApi` of ``DJANGO_EID["BROKER_API"]``.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final
from urllib.parse import quote, urlsplit

from django_eid.conf import EidSettings, eid_settings
from django_eid.records import CreatedSession, IdentificationRecord
from django_eid.transport import Answer, Transport


@dataclass(frozen=True)
class ReturnUrls:
    """Where the broker sends the user back: django-eid's three return URLs.

    The flow passes them as django-eid builds them (absolute, no query); each API adds
    what it needs to come back with the session's ids (:meth:`BrokerApi.return_urls`).
    """

    success: str
    abort: str
    error: str
    #: The one URL of an API whose broker sends every user back to one registered
    #: redirect URI (OpenID Connect's ``django_eid:oidc-callback``).
    callback: str = ""


@dataclass(frozen=True)
class SessionRequest:
    """What the flow asks of a new session, whatever the API spells it."""

    return_urls: ReturnUrls
    external_reference: str
    identity_provider: str | None = None
    #: The broker language of the request, a code of ``LANGUAGE`` (``NO``, ``EN``, ``SV``,
    #: ``DA``, ``FI``); each API spells it its own way.
    language: str | None = None
    get_social_security_number: bool = False
    iframe_domain: str | None = None
    iframe_web_messaging: bool = False
    #: A hint for the broker's form, never a proof; in the request body only.
    prefilled_social_security_number: str | None = None


@dataclass(frozen=True)
class ReturnedIds:
    """What a return URL says about its session, as the broker filled it in.

    ``request_id`` and ``external_id`` are every value given (more than one is refused by
    the flow); an unfilled placeholder counts as empty. ``error_status`` is the code an
    Error return carries, or ``""`` when the API gives none.
    """

    request_id: Sequence[str]
    external_id: Sequence[str]
    error_status: str = ""


#: Calls the broker's session API with the client's token: ``(method, url, retry=..., **kw)``.
ApiCall = Callable[..., Answer]


class BrokerApi(ABC):
    """One API of the broker. Subclasses set the class attributes and the calls."""

    #: The value of ``DJANGO_EID["BROKER_API"]`` that selects this API.
    name: ClassVar[str]
    #: Appended to ``AUTH_URL``: the OAuth 2.0 client-credentials token endpoint.
    token_path: ClassVar[str]
    #: ``BASE_URL`` and ``AUTH_URL`` when the settings give none (``None``: required).
    default_base_url: ClassVar[str | None] = None
    default_auth_url: ClassVar[str | None] = None
    #: ``SCOPES`` and ``TOKEN_AUTH_METHOD`` when the settings give none.
    default_scopes: ClassVar[tuple[str, ...]]
    default_token_auth_method: ClassVar[str] = "basic"  # noqa: S105  (a method, not a password)
    #: The query parameters of a return that carry the session id and the external
    #: reference, and all of those that carry the broker's ids (forwarded to a front end
    #: that finishes the identification through the JSON API).
    request_id_param: ClassVar[str]
    external_id_param: ClassVar[str]
    return_params: ClassVar[tuple[str, ...]]
    #: What a provider name of this API looks like (``NO_BANKID_WEB``, ``no_bankid_mobile``,
    #: ``nbid``); settings, gates and start requests are checked against it.
    provider_re: ClassVar[re.Pattern[str]]
    #: An example of it, for messages.
    provider_example: ClassVar[str]
    #: The provider names the API's public reference lists. The list is open (a name of
    #: the right shape is accepted everywhere); a setting naming another is warned about
    #: (check ``W023``): most likely a typo, or a name of another API.
    published_providers: ClassVar[tuple[str, ...]] = ()
    #: The eID scheme of this API's provider names, where the provider's unique id is the
    #: same whichever API reported it (NO BankID's PID): ``no-bankid`` for ``NO_BANKID_WEB``,
    #: ``no_bankid_mobile`` and ``nbid``. See :func:`provider_family`.
    provider_families: ClassVar[Mapping[str, str]] = {}
    #: Whether the broker's frame tells the page embedding it how it ended
    #: (``IFRAME_WEB_MESSAGING``); without it the frame page polls.
    web_messaging: ClassVar[bool] = False
    #: Whether :meth:`session_done` asks a call without personal data (else it answers
    #: ``None`` and the record is asked: :func:`django_eid.flow.settle_if_due` asks less often).
    status_call: ClassVar[bool] = False
    #: Whether a session's record can be had without the user's return (the REST APIs:
    #: by its id); OpenID Connect's identity comes only with the return's code, so its
    #: rows are not settled without it (:func:`django_eid.flow.settle`).
    settles_without_return: ClassVar[bool] = True
    #: Whether this API's records state their level of assurance (the eID Hub, OpenID
    #: Connect). Where they do not (v1, v2), a login takes the provider's published level
    #: (:func:`published_level`).
    states_level: ClassVar[bool] = False

    def __init__(
        self,
        call: ApiCall,
        settings: EidSettings,
        *,
        transport: Transport | None = None,
        config: BrokerConfig | None = None,
    ) -> None:
        self.call = call
        self.settings = settings
        self.config = config or BrokerConfig.of(settings, api=type(self))
        self.base_url = self.config.base_url
        #: The client's transport, for an API whose calls carry no client-credentials token.
        self.transport = transport

    # -- how the user comes back ------------------------------------------------------
    @classmethod
    @abstractmethod
    def return_urls(cls, urls: ReturnUrls, *, external_reference: str) -> ReturnUrls:
        """``urls`` as this API's create request sends them."""

    @classmethod
    @abstractmethod
    def returned_ids(cls, params: Mapping[str, Sequence[str]]) -> ReturnedIds:
        """The ids a return URL's query ``params`` carry."""

    @classmethod
    def return_kind(cls, params: Mapping[str, Sequence[str]]) -> str | None:
        """Which return (``success``, ``abort``, ``error``) a return to the one callback URL
        is, by its ``params``; ``None`` for an API whose returns each have their own URL."""
        return None

    @classmethod
    @abstractmethod
    def provider_country(cls, provider: str | None) -> str | None:
        """The ISO country of the persons of ``provider`` (this API's name), or ``None``."""

    @classmethod
    def provider_level(cls, provider: str | None) -> str | None:
        """The level of assurance an identification with ``provider`` gives, where this API
        fixes one per provider name (OpenID Connect's presets), else ``None``: a record of
        ``provider`` at another level is not what was asked for."""
        return None

    # -- the calls --------------------------------------------------------------------
    @abstractmethod
    def create_session(self, request: SessionRequest) -> CreatedSession:
        """Create a session; where to send the user, and its id."""

    @abstractmethod
    def get_session(self, request_id: str, *, metadata: bool = False) -> IdentificationRecord:
        """The session's record, parsed; whatever the API, in django-eid's terms.

        ``metadata`` asks for add-on data where the API has such a switch."""

    def record_of_return(
        self,
        request_id: str,
        *,
        external_id: str,
        params: Mapping[str, Sequence[str]],
        return_url: str,
    ) -> IdentificationRecord:
        """The record of a session the user came back from, with the return's query
        ``params`` and the ``return_url`` it reached (without query). The REST APIs ask
        :meth:`get_session`; OpenID Connect exchanges the return's code."""
        return self.get_session(request_id)

    @abstractmethod
    def session_done(self, request_id: str) -> bool | None:
        """Whether the session ended, without personal data; ``None`` when the API has no
        such call (then the record itself is asked)."""

    @abstractmethod
    def cancel_session(self, request_id: str) -> None:
        """End the session at the broker, so that its identity can no longer be used."""


def with_query(url: str, name: str, value: str) -> str:
    """``url`` with the query parameter ``name=value`` added to whatever query it has."""
    joiner = "&" if urlsplit(url).query else "?"
    return f"{url}{joiner}{name}={quote(value, safe='')}"


#: A provider name in any API's syntax (``NO_BANKID_WEB``, ``no_bankid_mobile``, ``otp-sms``).
ANY_PROVIDER_RE: Final = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*\Z")

#: The APIs django-eid speaks, by their ``BROKER_API`` name.
API_NAMES: Final = ("v1", "v2", "eid-hub", "oidc")


def broker_api(settings: EidSettings | None = None) -> type[BrokerApi]:
    """The API ``settings`` (the site's by default) choose with ``BROKER_API``; v1's when
    the name is unknown (check ``E027`` says so)."""
    try:
        return api_class((settings or eid_settings).BROKER_API)
    except KeyError:
        return api_class("v1")


@dataclass(frozen=True)
class BrokerConfig:
    """The broker as the settings configure it: each of ``BASE_URL``, ``AUTH_URL``,
    ``SCOPES`` and ``TOKEN_AUTH_METHOD`` as set, or its API's default where it is not."""

    api: type[BrokerApi]
    base_url: str
    auth_url: str
    scopes: tuple[str, ...]
    token_auth_method: str

    @classmethod
    def of(
        cls, settings: EidSettings | None = None, *, api: type[BrokerApi] | None = None
    ) -> BrokerConfig:
        """The configuration of ``settings`` (the site's by default), for ``api`` (the
        one they choose by default)."""
        s = settings or eid_settings
        api = api or broker_api(s)
        scopes, method = s.SCOPES, s.TOKEN_AUTH_METHOD
        return cls(
            api=api,
            base_url=s.BASE_URL or (api.default_base_url or "").rstrip("/"),
            auth_url=s.AUTH_URL or (api.default_auth_url or "").rstrip("/"),
            scopes=api.default_scopes if scopes is None else scopes,
            token_auth_method=api.default_token_auth_method if method is None else method,
        )

    @property
    def token_url(self) -> str:
        """The OAuth 2.0 client-credentials token endpoint."""
        return self.auth_url + self.api.token_path


def api_class(name: str) -> type[BrokerApi]:
    """The :class:`BrokerApi` called ``name`` (``KeyError`` for an unknown one)."""
    return _classes()[name]


@functools.cache
def _classes() -> dict[str, type[BrokerApi]]:
    # Imported on first use: the API modules import this one. Built once: the flow asks
    # for the API at every start and return.
    from django_eid.brokers.eidhub import EidHubApi
    from django_eid.brokers.oidc import OidcApi
    from django_eid.brokers.v1 import V1Api
    from django_eid.brokers.v2 import V2Api

    return {api.name: api for api in (V1Api, V2Api, EidHubApi, OidcApi)}


def provider_family(provider: str) -> str:
    """The eID scheme of ``provider``, a name of any of the APIs (``nbid`` -> ``no-bankid``).

    A person's unique id at their eID stays theirs when a site moves to another broker API
    that spells the provider otherwise; a name no API's table knows is its own family
    (case aside).
    """
    for api in _classes().values():
        family = api.provider_families.get(provider)
        if family is not None:
            return family
    return provider.lower()


#: The level of assurance of each eID scheme as its issuer publishes it (the eIDAS
#: notification, or the national framework where it maps to one), for the broker APIs whose
#: records state no level (v1, v2). A scheme with several levels (MitID: low, substantial and
#: high), or of no published level, is not here: its level is unknown, and an unknown level
#: does not log in (``LOGIN_MIN_LOA``) unless the site lowers the setting to ``None``.
PUBLISHED_LEVELS: Final[Mapping[str, str]] = {
    # Norwegian BankID and Buypass ID: "Høyt" (level 4), notified as eIDAS high.
    "no-bankid": "high",
    "no-buypass": "high",
    # Swedish BankID: "Tillitsnivå 3" of the Swedish framework, eIDAS substantial.
    "se-bankid": "substantial",
    # NemID: notified as eIDAS substantial.
    "dk-nemid": "substantial",
    # The Finnish Trust Network's bank and mobile certificates: substantial at least.
    "fi-ftn": "substantial",
    "fi_tupas": "substantial",
    "fi_mobiilivarmenne": "substantial",
    # One-time codes by SMS or e-mail prove a phone or a mailbox, not a person.
    "sms_otp": "low",
    "email_otp": "low",
}


def published_level(provider: str | None) -> str | None:
    """The published level of ``provider``'s eID scheme (:data:`PUBLISHED_LEVELS`), or
    ``None`` when it has none (or several)."""
    return PUBLISHED_LEVELS.get(provider_family(provider)) if provider else None


def family_names(provider: str) -> tuple[str, ...]:
    """Every provider name, of any API, in the eID scheme of ``provider`` (itself included)."""
    family = provider_family(provider)
    names = {provider}
    for api in _classes().values():
        names.update(name for name, of in api.provider_families.items() if of == family)
    return tuple(sorted(names))
