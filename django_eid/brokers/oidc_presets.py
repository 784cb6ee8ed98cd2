"""What each OpenID Connect broker calls things: providers, acr values, claims, levels.

One :class:`Preset` per broker (``OIDC_PRESET``): the eIDs it offers under django-eid's
provider names and the ``acr_values`` that select each, the claims that carry the
person's name, birth date, national identity number and stable id, where those claims
live (the ``id_token`` or the userinfo answer), and the level of assurance each
authentication gives. The protocol itself is :mod:`django_eid.brokers.oidc`'s.

Sources: ``broker-generations.md`` section 3.6 and 3.10 (Idura's, Signicat's, BankID
Norge's and Vipps' published documentation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from django_eid import national_id

#: The levels of assurance, lowest first (eIDAS: low, substantial, high).
LEVELS: Final = ("low", "substantial", "high")


def level_rank(level: str | None) -> int:
    """``level``'s place in :data:`LEVELS`; -1 for none or an unknown one."""
    return LEVELS.index(level) if level in LEVELS else -1


@dataclass(frozen=True)
class Provider:
    """One eID of a broker, under django-eid's name for it."""

    #: What ``acr_values`` asks for to get this eID (``None``: the broker's only eID).
    acr: str | None
    #: The level of assurance of an identification with it.
    level: str
    #: The eID scheme (:func:`django_eid.brokers.provider_family`): the person's unique id
    #: at it is the same through every broker (NO BankID's PID).
    family: str
    #: The ISO country whose persons it identifies.
    country: str | None
    #: Other acr values a token may name for this eID at this level (Idura's SE BankID
    #: device variants): an acr listed nowhere is an eID or a level the preset does not know.
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claims:
    """The identity an OpenID provider returned, in django-eid's terms."""

    provider: str | None
    unique_id: str | None
    name: str | None
    first_name: str | None
    last_name: str | None
    birth_date: str | None
    number: str | None
    number_country: str | None
    number_type: str | None
    level: str | None


@dataclass(frozen=True)
class Preset:
    """An OpenID Connect broker's vocabulary."""

    name: str
    providers: Mapping[str, Provider]
    #: Scopes asked for always, and those added for the national identity number.
    scopes: tuple[str, ...]
    number_scopes: tuple[str, ...] = ()
    #: Whether the person's data is read from the userinfo endpoint (else the id_token).
    userinfo: bool = False
    #: The id_token's expected algorithms (the discovery document narrows them further).
    algorithms: tuple[str, ...] = ("RS256",)
    #: A ``login_hint`` carrying the person's number, for a same-person re-verification:
    #: ``"{number}"`` is replaced. ``None``: the broker has none (only the comparison decides).
    number_hint: Mapping[str | None, str] = field(default_factory=dict)

    def provider_for_acr(self, acr: str | None) -> str | None:
        """The provider name whose acr value is ``acr`` (``None`` when none is)."""
        if not acr:
            return None
        base = acr.split(";")[0]
        for name, provider in self.providers.items():
            if provider.acr is not None and (base == provider.acr or base in provider.also):
                return name
        return None

    def read(self, claims: Mapping[str, Any]) -> Claims:
        """The identity in ``claims`` (the id_token's, merged with userinfo's)."""
        return _READERS[self.name](self, claims)


def _str(claims: Mapping[str, Any], *names: str) -> str | None:
    """The first of ``names`` that is a non-empty string in ``claims``."""
    for name in names:
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _unlisted(*names: str | None) -> str | None:
    """The eID a token names that the preset does not list, under the token's own name for
    it (its identity scheme, its acr): stored as the provider, it matches no provider a
    start asked for, no ``ALLOWED_PROVIDERS`` and no gate's ``providers``, so the flow
    refuses it where one was asked for (``PROVIDER_NOT_ALLOWED``)."""
    for name in names:
        if name:
            cleaned = "".join(c for c in name.split(";")[0] if c.isascii() and c.isprintable())
            if cleaned.strip():
                return cleaned.strip()[:64]
    return None


def _person(
    preset: Preset,
    claims: Mapping[str, Any],
    provider: str | None,
    *,
    unique_id: str | None,
    number: str | None = None,
    country: str | None = None,
    number_type: str | None = None,
    level_known: bool = True,
) -> Claims:
    """The identity in ``claims`` of ``provider``: the standard name and birth-date claims
    (OIDC Core 5.1) beside what the broker's own claims said; the level and, unless given,
    the number's country are the provider's. ``level_known`` false: the token named the eID
    but not a level the preset lists for it (MitID's ``low``), which is then unknown, never
    the eID's usual one."""
    spec = preset.providers.get(provider or "")
    return Claims(
        provider=provider,
        unique_id=unique_id,
        name=_str(claims, "name"),
        first_name=_str(claims, "given_name"),
        last_name=_str(claims, "family_name"),
        # Idura's older claim name beside the standard one.
        birth_date=_str(claims, "birthdate", "dateofbirth"),
        number=number,
        number_country=country or (spec.country if spec else None),
        number_type=number_type,
        level=spec.level if spec and level_known else None,
    )


# -- Idura (Criipto) Verify ------------------------------------------------------------------
_IDURA_NUMBER_CLAIMS: Final = {
    "nobankid-oidc": "socialno",
    "novippslogin": "socialno",
    "sebankid": "ssn",
    "dkmitid": "cprNumberIdentifier",
    "fitupas": "hetu",
}
_IDURA_UNIQUE_ID_CLAIMS: Final = {"nobankid-oidc": "uniqueuserid", "dkmitid": "uuid"}
_IDURA_SCHEMES: Final = {
    "nobankid-oidc": "no-bankid",
    "novippslogin": "no-vipps",
    "sebankid": "se-bankid",
    "dkmitid": "dk-mitid",
    "fitupas": "fi-ftn",
}


def _idura(preset: Preset, claims: Mapping[str, Any]) -> Claims:
    scheme = _str(claims, "identityscheme") or ""
    # The acr used says which eID and level (NO BankID high or substantial, MitID's three);
    # an acr the preset does not list leaves the eID to the identity scheme and the level
    # unknown, and an unknown scheme too is an eID of its own (refused where one was asked).
    acr = _str(claims, "authenticationtype", "acr")
    by_acr = preset.provider_for_acr(acr)
    provider = by_acr or _IDURA_SCHEMES.get(scheme) or _unlisted(scheme, acr)
    known = provider in preset.providers
    return _person(
        preset,
        claims,
        provider,
        level_known=by_acr is not None,
        unique_id=_str(claims, _IDURA_UNIQUE_ID_CLAIMS.get(scheme, "sub"), "sub"),
        number=_str(claims, _IDURA_NUMBER_CLAIMS.get(scheme, "socialno")),
        country=None if known else _str(claims, "country"),
    )


# -- Signicat OIDC (eID Hub) -------------------------------------------------------------------
_NIN_TYPES: Final = {"BIRTH": national_id.FODSELSNUMMER}


def _signicat(preset: Preset, claims: Mapping[str, Any]) -> Claims:
    acr = _str(claims, "acr")
    provider = _str(claims, "idp") or preset.provider_for_acr(acr) or _unlisted(acr)
    nin_type = _str(claims, "nin_type")
    return _person(
        preset,
        claims,
        provider,
        unique_id=_str(claims, "idp_id", "sub"),
        number=_str(claims, "nin"),
        country=_str(claims, "nin_issuing_country"),
        number_type=_NIN_TYPES.get(nin_type) if nin_type else None,
    )


# -- BankID Norge ----------------------------------------------------------------------------------
def _bankid_no(preset: Preset, claims: Mapping[str, Any]) -> Claims:
    return _person(
        preset,
        claims,
        preset.provider_for_acr(_str(claims, "acr")) or _unlisted(_str(claims, "acr")),
        # ``sub`` changes between logins; the PID in bankid_altsub is the stable id.
        unique_id=_str(claims, "bankid_altsub"),
        number=_str(claims, "nnin_altsub"),
        country=national_id.NORWAY,
    )


# -- Vipps Login -----------------------------------------------------------------------------------
def _vipps(preset: Preset, claims: Mapping[str, Any]) -> Claims:
    # The pairwise ``sub`` is stable per person and client; Vipps' docs name the number
    # claim both ways.
    return _person(
        preset, claims, "vipps", unique_id=_str(claims, "sub"), number=_str(claims, "nin", "nnin")
    )


def _generic(preset: Preset, claims: Mapping[str, Any]) -> Claims:
    provider = preset.provider_for_acr(_str(claims, "acr"))
    return _person(preset, claims, provider, unique_id=_str(claims, "sub"))


_READERS: Final = {
    "idura": _idura,
    "signicat": _signicat,
    "bankid-no": _bankid_no,
    "vipps": _vipps,
    "generic": _generic,
}

NO, SE, DK, FI = national_id.NORWAY, national_id.SWEDEN, national_id.DENMARK, national_id.FINLAND

PRESETS: Final[Mapping[str, Preset]] = {
    "idura": Preset(
        name="idura",
        providers={
            "no-bankid": Provider(
                "urn:grn:authn:no:bankid",
                "high",
                "no-bankid",
                NO,
                also=("urn:grn:authn:no:bankid:high",),
            ),
            "no-bankid-substantial": Provider(
                "urn:grn:authn:no:bankid:substantial", "substantial", "no-bankid", NO
            ),
            "no-vipps": Provider("urn:grn:authn:no:vipps", "substantial", "no-vipps", NO),
            "se-bankid": Provider(
                "urn:grn:authn:se:bankid",
                "substantial",
                "se-bankid",
                SE,
                also=(
                    "urn:grn:authn:se:bankid:same-device",
                    "urn:grn:authn:se:bankid:another-device",
                    "urn:grn:authn:se:bankid:another-device:qr",
                ),
            ),
            "dk-mitid": Provider(
                "urn:grn:authn:dk:mitid:substantial", "substantial", "dk-mitid", DK
            ),
            "dk-mitid-high": Provider("urn:grn:authn:dk:mitid:high", "high", "dk-mitid", DK),
            "fi-ftn": Provider(
                "urn:grn:authn:fi:all",
                "substantial",
                "fi-ftn",
                FI,
                also=("urn:grn:authn:fi:bank-id", "urn:grn:authn:fi:mobile-id"),
            ),
        },
        scopes=("openid",),
        number_scopes=("ssn",),
        # Idura's hints by eID (section 3.7); sent through PAR only.
        number_hint={
            "no-bankid": "BID:{number}",
            "no-bankid-substantial": "BIS:{number}",
            "se-bankid": "sub:{number}",
            "dk-mitid": "sub:{number}",
            "dk-mitid-high": "sub:{number}",
        },
    ),
    "signicat": Preset(
        name="signicat",
        providers={
            "nbid": Provider("idp:nbid", "high", "no-bankid", NO),
            "sbid": Provider("idp:sbid", "substantial", "se-bankid", SE),
            "mitid": Provider("idp:mitid", "substantial", "dk-mitid", DK),
            "ftn": Provider("idp:ftn", "substantial", "fi-ftn", FI),
        },
        scopes=("openid", "profile", "idp-id"),
        number_scopes=("nin",),
        userinfo=True,
    ),
    "bankid-no": Preset(
        name="bankid-no",
        providers={
            "bid": Provider("urn:bankid:bid", "high", "no-bankid", NO),
            "bis": Provider("urn:bankid:bis", "substantial", "no-bankid", NO),
        },
        scopes=("openid", "profile"),
        number_scopes=("nnin_altsub",),
        algorithms=("ES256", "RS256"),
        number_hint={None: ":{number}", "bid": "BID:{number}", "bis": "BIS:{number}"},
    ),
    "vipps": Preset(
        name="vipps",
        providers={"vipps": Provider(None, "substantial", "no-vipps", NO)},
        scopes=("openid", "name", "birthDate"),
        number_scopes=("nin",),
        userinfo=True,
    ),
    "generic": Preset(name="generic", providers={}, scopes=("openid", "profile")),
}

#: ``OIDC_PRESET``'s values (``None`` is the generic preset).
PRESET_NAMES: Final = ("idura", "bankid-no", "signicat", "vipps")


def preset(name: str | None) -> Preset:
    """The preset called ``name`` (the generic one for ``None`` or an unknown name)."""
    return PRESETS.get(name or "generic", PRESETS["generic"])
