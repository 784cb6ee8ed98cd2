"""The claims of the test OpenID provider: one layout per django-eid preset, and the generic.

Each layout is what that broker's tokens carry (the claim names django-eid's
``oidc_presets`` reads, which scope releases each, and which come only from the userinfo
endpoint): the OP picks a client's layout from its ``INTEROP_LAYOUTS`` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from oauth2_provider.oauth2_validators import OAuth2Validator

PROFILE = ("name", "given_name", "family_name", "birthdate")


@dataclass(frozen=True)
class Layout:
    """The claims of one broker's tokens about ``person``."""

    claims: Callable[[Mapping[str, str]], dict[str, str]]
    #: The scope that releases each claim (a claim not listed is never sent).
    scope_of: Mapping[str, str]
    #: Claims only the userinfo endpoint answers (not in the id_token).
    userinfo_only: frozenset[str] = frozenset()


def _profile(person: Mapping[str, str]) -> dict[str, str]:
    return {name: person[name] for name in PROFILE}


LAYOUTS: Mapping[str, Layout] = {
    # OIDC Core's standard claims: the ``sub`` is the OP's user id.
    "generic": Layout(
        claims=_profile,
        scope_of={"sub": "openid", **dict.fromkeys(PROFILE, "profile")},
    ),
    # Idura Verify, Norwegian BankID: all in the id_token, the number with the ``ssn`` scope.
    "idura": Layout(
        claims=lambda p: {
            **_profile(p),
            "identityscheme": "nobankid-oidc",
            "authenticationtype": "urn:grn:authn:no:bankid",
            "uniqueuserid": p["pid"],
            "socialno": p["number"],
            "country": "NO",
        },
        scope_of={
            **dict.fromkeys(
                ("sub", *PROFILE, "identityscheme", "authenticationtype", "uniqueuserid"),
                "openid",
            ),
            "country": "openid",
            "socialno": "ssn",
        },
    ),
    # Signicat: the eID and its id in the id_token; the number from userinfo only.
    "signicat": Layout(
        claims=lambda p: {
            **_profile(p),
            "acr": "idp:nbid",
            "idp": "nbid",
            "idp_id": p["pid"],
            "nin": p["number"],
            "nin_type": "BIRTH",
            "nin_issuing_country": "NO",
        },
        scope_of={
            "sub": "openid",
            "acr": "openid",
            "idp": "openid",
            **dict.fromkeys(PROFILE, "profile"),
            "idp_id": "idp-id",
            **dict.fromkeys(("nin", "nin_type", "nin_issuing_country"), "nin"),
        },
        userinfo_only=frozenset({"nin", "nin_type", "nin_issuing_country"}),
    ),
    # BankID Norge: the acr says BankID (high); the PID and the number as "altsub" claims.
    "bankid-no": Layout(
        claims=lambda p: {
            **_profile(p),
            "acr": "urn:bankid:bid",
            "bankid_altsub": p["pid"],
            "nnin_altsub": p["number"],
        },
        scope_of={
            **dict.fromkeys(("sub", "acr", "bankid_altsub"), "openid"),
            **dict.fromkeys(PROFILE, "profile"),
            "nnin_altsub": "nnin_altsub",
        },
    ),
    # Vipps Login: a pairwise ``sub``; the person only from userinfo, by Vipps' scopes.
    "vipps": Layout(
        claims=lambda p: {**_profile(p), "sub": p["vipps_sub"], "nin": p["number"]},
        scope_of={
            "sub": "openid",
            **dict.fromkeys(("name", "given_name", "family_name"), "name"),
            "birthdate": "birthDate",
            "nin": "nin",
        },
        userinfo_only=frozenset({*PROFILE, "nin"}),
    ),
}


def layout_of(request: Any) -> Layout:
    """The layout of the client of ``request`` (an oauthlib request)."""
    return LAYOUTS[settings.INTEROP_LAYOUTS[request.client.client_id]]


class InteropValidator(OAuth2Validator):
    """django-oauth-toolkit's validator, with the claims of the client's layout."""

    def get_additional_claims(self, request: Any) -> dict[str, str]:
        return layout_of(request).claims(settings.INTEROP_PERSON)

    def get_oidc_claims(self, token: Any, token_handler: Any, request: Any) -> dict[str, Any]:
        # ``oidc_claim_scope`` per layout: the same claim is released by another scope at
        # another broker (Vipps' ``name`` scope, the ``profile`` scope elsewhere).
        scope_of = layout_of(request).scope_of
        return {
            name: value(request) if callable(value) else value
            for name, value in self.get_claim_dict(request).items()
            if scope_of.get(name) in request.scopes
        }

    def get_id_token_dictionary(
        self, token: Any, token_handler: Any, request: Any
    ) -> tuple[dict[str, Any], Any]:
        claims, expiration = super().get_id_token_dictionary(token, token_handler, request)
        for name in layout_of(request).userinfo_only:
            claims.pop(name, None)
        return claims, expiration

    def get_discovery_claims(self, request: Any) -> list[str]:
        return sorted({name for layout in LAYOUTS.values() for name in layout.scope_of})
