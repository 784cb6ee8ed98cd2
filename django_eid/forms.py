"""The start form: which provider, how to display the broker, where to go next."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _

from django_eid.conf import eid_settings
from django_eid.models import Identification, fit, max_length
from django_eid.validation import PROVIDER_RE

#: What a ``next`` value may be at most (what ``next_url`` stores); longer ones are dropped
#: like foreign ones.
NEXT_MAX_LENGTH = max_length("next_url") or 0


def safe_next(request: HttpRequest, value: str | None) -> str:
    """``value`` if it is a safe place to send this user after the flow, else ``""``."""
    if not value or len(value) > NEXT_MAX_LENGTH or value != value.strip():
        return ""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return ""
    ok = url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return value if ok else ""


class StartForm(forms.Form):
    """What the start page posts: the provider, the display mode and ``next``.

    The provider choice is offered only when ``ALLOWED_PROVIDERS`` lists several; an
    unsafe ``next`` is dropped, never reported, since the field is hidden.
    """

    provider = forms.CharField(
        label=_("Identity provider"), required=False, max_length=max_length("identity_provider")
    )
    display = forms.ChoiceField(
        label=_("Display"),
        choices=Identification.Display.choices,
        required=False,
        initial=Identification.Display.REDIRECT,
        widget=forms.RadioSelect,
    )
    # Unstripped, and without the null-character validator: ``clean_next`` judges the raw
    # value and drops an unsafe one silently; the field is hidden, so it is never an error.
    next = forms.CharField(required=False, strip=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["next"].validators = []
        self.request = request
        allowed = eid_settings.ALLOWED_PROVIDERS
        if allowed and len(allowed) > 1:
            # No "choose at the broker" entry: the broker would then offer every
            # provider of the account, not just the allowed ones.
            choices: list[tuple[str, Any]] = [(p, p.replace("_", " ").title()) for p in allowed]
            self.fields["provider"] = forms.ChoiceField(
                label=_("Identity provider"),
                choices=choices,
                required=False,
                initial=eid_settings.IDENTITY_PROVIDER or allowed[0],
            )
        else:
            self.fields["provider"].widget = forms.HiddenInput()

    @property
    def offers_provider_choice(self) -> bool:
        return isinstance(self.fields["provider"], forms.ChoiceField)

    def clean_provider(self) -> str | None:
        value: str = self.cleaned_data.get("provider") or ""
        if not value:
            allowed_only = eid_settings.ALLOWED_PROVIDERS
            if eid_settings.IDENTITY_PROVIDER or not allowed_only:
                return eid_settings.IDENTITY_PROVIDER
            if len(allowed_only) == 1:
                # One allowed provider: the broker must not offer the account's others.
                return allowed_only[0]
            raise forms.ValidationError(_("Choose an identity provider."), code="required")
        if not PROVIDER_RE.match(value):
            raise forms.ValidationError(
                _(
                    "“%(provider)s” is not a provider name (upper-case words joined by underscores)."
                ),
                code="malformed",
                params={"provider": fit("identity_provider", value)},
            )
        # ALLOWED_PROVIDERS when set, else only IDENTITY_PROVIDER (any, when neither is set).
        offered = eid_settings.ALLOWED_PROVIDERS
        if offered is None and eid_settings.IDENTITY_PROVIDER:
            offered = (eid_settings.IDENTITY_PROVIDER,)
        if offered is not None and value not in offered:
            raise forms.ValidationError(
                _("The provider %(provider)s is not offered here."),
                code="not_allowed",
                params={"provider": value},
            )
        return value

    def clean_display(self) -> str:
        return self.cleaned_data.get("display") or Identification.Display.REDIRECT

    def clean_next(self) -> str:
        # An unsafe next is dropped silently, as Django's own login view does.
        return safe_next(self.request, self.cleaned_data.get("next"))
