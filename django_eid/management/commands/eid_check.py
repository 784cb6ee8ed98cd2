"""``manage.py eid_check``: fetch a new access token and report what came back.

Checks the credentials, scopes and reachability of the broker with one token
request that bypasses the token cache. Prints the token type, its lifetime,
the scopes asked and the token endpoint, or exits non-zero with a one-line
reason. Never prints the token or the client secret.

Also tries the configured keys on every stored national identity number: rows that no key
decrypts (a key removed too early) are named by id, never by number, with what to do,
and make the command exit non-zero after the broker check.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from django.urls import Resolver404, resolve

from django_eid import crypto
from django_eid.client import EidClient
from django_eid.conf import eid_settings
from django_eid.deadline import bounded
from django_eid.exceptions import (
    EidConfigurationError,
    EidError,
    EidUnavailable,
    InvalidClient,
    InvalidScope,
    TokenError,
)
from django_eid.models import Identification
from django_eid.validation import problems


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _own_sandbox(url: str) -> bool:
    """Whether ``url`` is this site's own sandbox (its path resolves to a sandbox view): then
    only this site's running server can answer it, never this command."""
    try:
        match = resolve(urlsplit(url).path)
    except Resolver404:
        return False
    return match.namespace.split(":")[-1] == "django_eid_sandbox"


class Command(BaseCommand):
    help = (
        "Fetch a new access token from the broker with the configured credentials and "
        "scopes, and report the result; try the configured keys on the stored national "
        "identity numbers. Exits non-zero when no token was issued or a number cannot be "
        "decrypted."
    )
    # Configuration problems are reported below in one line, not as a check listing.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        s = eid_settings
        for problem in problems(s):
            if problem.level == "warning":
                self.stderr.write(f"Warning: {_one_line(problem.message)} ({problem.id})")
        # Before the broker: its failure ends the command, and this is still worth knowing.
        unreadable = self._check_keys()
        try:
            client = EidClient()
        except EidConfigurationError as err:
            raise CommandError(f"Configuration error: {_one_line(err)}") from err

        if s.BROKER_API == "oidc":
            try:
                self._check_provider(client)
            finally:
                client.close()
            if unreadable:
                raise CommandError(
                    f"{crypto.unreadable_summary(unreadable)} {crypto.LOST_KEY_ADVICE}"
                )
            return
        config = client.config
        scopes = " ".join(config.scopes)
        try:
            token = client.fetch_token()
        except InvalidScope as err:
            detail = f" ({_one_line(err.description)})" if err.description else ""
            raise CommandError(
                f"invalid_scope: the broker refused the scopes '{scopes}' for client "
                f"{s.CLIENT_ID!r}{detail}; ask the broker to enable them or change "
                "DJANGO_EID['SCOPES']."
            ) from err
        except InvalidClient as err:
            raise CommandError(
                f"Bad credentials: the broker did not accept client id {s.CLIENT_ID!r} and its "
                f"secret (HTTP {err.status_code}, {err.error or 'no error code'}); check "
                "DJANGO_EID['CLIENT_ID'], ['CLIENT_SECRET'] and ['TOKEN_AUTH_METHOD']."
            ) from err
        except EidUnavailable as err:
            hint = ""
            if _own_sandbox(config.token_url):
                hint = (
                    "; the token endpoint is this site's sandbox, which answers only while "
                    "the development server runs: start it (python manage.py runserver, at "
                    "the address and port of DJANGO_EID['AUTH_URL']) and run eid_check again"
                )
            raise CommandError(f"Broker unreachable: {_one_line(err)}{hint}") from err
        except TokenError as err:
            raise CommandError(f"No token issued: {_one_line(err)}") from err
        except EidError as err:
            raise CommandError(f"Unexpected answer from the broker: {_one_line(err)}") from err
        finally:
            client.close()

        self.stdout.write(f"Broker API: {config.api.name}")
        self.stdout.write(f"Token endpoint: {config.token_url}")
        self.stdout.write(f"Client id: {s.CLIENT_ID}")
        self.stdout.write(f"Client authentication: {client.config.token_auth_method}")
        self.stdout.write(f"Scopes asked: {scopes}")
        self.stdout.write(f"Token type: {token.token_type}")
        self.stdout.write(f"Lifetime: {token.expires_in} s")
        self.stdout.write(self.style.SUCCESS("OK: the broker issued an access token."))
        if unreadable:
            raise CommandError(f"{crypto.unreadable_summary(unreadable)} {crypto.LOST_KEY_ADVICE}")

    def _check_provider(self, client: EidClient) -> None:
        """An OpenID provider: its discovery document and keys, fetched afresh, and the
        client's credentials through a pushed authorization request when it has PAR."""
        from django_eid.brokers.oidc import OidcApi

        s = eid_settings
        api = client.api
        assert isinstance(api, OidcApi)
        redirect_uri = s.OIDC_REDIRECT_URI
        try:
            with bounded(s.TIMEOUT):
                metadata = api.discovery(fresh=True)
                keys = api.jwks(refresh=True)
                algorithms = api.algorithms()
                pushed = api.probe_client(redirect_uri) if redirect_uri else None
        except InvalidClient as err:
            raise CommandError(
                f"Bad credentials: the provider did not accept client id {s.CLIENT_ID!r} "
                f"(HTTP {err.status_code}, {err.error or 'no error code'}); check "
                "DJANGO_EID['CLIENT_ID'], ['CLIENT_SECRET'] (or ['OIDC_PRIVATE_KEY']) and "
                "['TOKEN_AUTH_METHOD']."
            ) from err
        except TokenError as err:
            raise CommandError(
                f"The provider refused a pushed authorization request: {_one_line(err)}; "
                "check that OIDC_REDIRECT_URI is registered and the scopes are enabled."
            ) from err
        except EidUnavailable as err:
            hint = ""
            if _own_sandbox(f"{s.OIDC_ISSUER}/.well-known/openid-configuration"):
                hint = "; the issuer is this site's sandbox: start the development server"
            raise CommandError(f"Provider unreachable: {_one_line(err)}{hint}") from err
        except EidError as err:
            raise CommandError(f"Unexpected answer from the provider: {_one_line(err)}") from err
        if not algorithms:
            raise CommandError(
                "The provider signs id_tokens with none of the algorithms the preset accepts."
            )
        self.stdout.write("Broker API: oidc")
        self.stdout.write(f"Preset: {s.OIDC_PRESET or 'generic'}")
        self.stdout.write(f"Issuer: {s.OIDC_ISSUER}")
        self.stdout.write(f"Authorization endpoint: {metadata['authorization_endpoint']}")
        self.stdout.write(f"Token endpoint: {metadata['token_endpoint']}")
        par = metadata.get("pushed_authorization_request_endpoint")
        self.stdout.write(f"Pushed authorization requests: {'yes' if par else 'no'}")
        self.stdout.write(f"id_token algorithms: {', '.join(algorithms)}")
        self.stdout.write(f"Signing keys: {len(keys.keys)}")
        self.stdout.write(f"Client id: {s.CLIENT_ID}")
        self.stdout.write(f"Client authentication: {client.config.token_auth_method}")
        if pushed:
            self.stdout.write(
                self.style.SUCCESS(
                    "OK: the provider accepted the client and its redirect URI "
                    "(a pushed authorization request)."
                )
            )
        else:
            why = "no PAR endpoint" if redirect_uri else "OIDC_REDIRECT_URI is not set"
            self.stdout.write(
                self.style.SUCCESS(
                    f"OK: the provider's metadata and keys are valid; the client's "
                    f"credentials are first used at the first identification ({why})."
                )
            )

    def _check_keys(self) -> list[int]:
        """The ids of the stored numbers no configured key decrypts, reported as found."""
        try:
            stored = Identification.objects.filter(social_security_number__isnull=False).count()
            unreadable = Identification.objects.unreadable_numbers()
        except DatabaseError as err:  # not migrated yet, or no database here
            self.stderr.write(
                f"Warning: the stored identifications could not be read ({type(err).__name__}); "
                "the encryption keys were not checked."
            )
            return []
        if unreadable:
            self.stderr.write(f"Error: {crypto.unreadable_summary(unreadable)}")
        else:
            self.stdout.write(
                f"Stored national identity numbers: {stored}, all readable with the configured keys."
            )
        return unreadable
