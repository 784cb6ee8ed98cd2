"""The start form: which provider, how to display the broker, where to go next.

The rules themselves are the flow's (:func:`django_eid.flow.choose_provider`,
:func:`django_eid.flow.safe_next`); the form only presents them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_eid import flow
from django_eid.conf import eid_settings
from django_eid.models import Identification, max_length


def safe_next(request: HttpRequest, value: str | None) -> str:
    """``value`` if it is a safe place to send this user after the flow, else ``""``."""
    return flow.safe_next(value, host=request.get_host(), secure=request.is_secure())


class StartForm(forms.Form):
    """What the start page posts: the provider, the display mode and ``next``.

    The provider choice is offered only when several providers are (``ALLOWED_PROVIDERS``,
    narrowed by a gate's ``providers`` in ``restrict``); an unsafe ``next`` is dropped,
    never reported, since the field is hidden.
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

    def __init__(
        self,
        *args: Any,
        request: HttpRequest,
        restrict: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["next"].validators = []
        self.request = request
        self.restrict = restrict
        offered = flow.offered_providers(restrict)
        if offered and len(offered) > 1:
            # No "choose at the broker" entry: the broker would then offer every
            # provider of the account, not just the offered ones.
            choices: list[tuple[str, Any]] = [(p, p.replace("_", " ").title()) for p in offered]
            default = eid_settings.IDENTITY_PROVIDER
            self.fields["provider"] = forms.ChoiceField(
                label=_("Identity provider"),
                choices=choices,
                required=False,
                initial=default if default in offered else offered[0],
            )
        else:
            self.fields["provider"].widget = forms.HiddenInput()

    @property
    def offers_provider_choice(self) -> bool:
        return isinstance(self.fields["provider"], forms.ChoiceField)

    def clean_provider(self) -> str | None:
        try:
            return flow.choose_provider(self.cleaned_data.get("provider"), restrict=self.restrict)
        except flow.Refused as refused:
            raise forms.ValidationError(refused.message, code=refused.outcome.code) from None

    def clean_display(self) -> str:
        return self.cleaned_data.get("display") or Identification.Display.REDIRECT

    def clean_next(self) -> str:
        # An unsafe next is dropped silently, as Django's own login view does.
        return safe_next(self.request, self.cleaned_data.get("next"))
