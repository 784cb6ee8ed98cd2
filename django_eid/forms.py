"""The start form: which provider, how to display the broker, where to go next.

The rules themselves are the flow's (:func:`django_eid.flow.choose_provider`,
:func:`django_eid.flow.safe_next`); the form only presents them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
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


class SignupForm(forms.Form):
    """What a person verified at the door chooses for their new account (``SIGNUP = "form"``).

    The user model's ``USERNAME_FIELD``, ``EMAIL_FIELD`` and ``REQUIRED_FIELDS``, each as the
    model's own form field (its validators and length), unique ones checked against the
    existing accounts (case aside); ``first_name`` and ``last_name`` where the model has
    them, pre-filled with the verified name. Replace it with ``SIGNUP_FORM``: a form taking
    ``identification`` as a keyword argument; its ``cleaned_data`` go to the adapter's
    ``populate_user``.
    """

    def __init__(self, *args: Any, identification: Identification, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.identification = identification
        model = get_user_model()
        self.user_model = model
        meta = model._meta
        wanted = [
            "first_name",
            "last_name",
            model.USERNAME_FIELD,
            model.get_email_field_name(),
            *getattr(model, "REQUIRED_FIELDS", ()),
        ]
        initial = {"first_name": identification.first_name, "last_name": identification.last_name}
        for name in dict.fromkeys(wanted):
            try:
                field = meta.get_field(name)
            except FieldDoesNotExist:
                continue
            if not getattr(field, "concrete", False) or getattr(field, "primary_key", False):
                continue
            form_field = field.formfield()  # type: ignore[union-attr]
            if form_field is None:
                continue
            if name == model.USERNAME_FIELD or name == model.get_email_field_name():
                form_field.required = True
            self.fields[name] = form_field
            if initial.get(name):
                self.initial.setdefault(name, initial[name])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        meta = self.user_model._meta
        for name, value in list(cleaned.items()):
            try:
                field = meta.get_field(name)
            except FieldDoesNotExist:
                continue  # a subclass's own field: not the user model's
            if not (getattr(field, "unique", False) and value):
                continue
            lookup = f"{name}__iexact" if isinstance(value, str) else name
            if self.user_model._default_manager.filter(**{lookup: value}).exists():
                self.add_error(name, _("An account with this value exists already."))
        return cleaned
