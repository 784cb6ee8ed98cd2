"""The form of the sandbox login page: who to be, and how the session ends."""

from __future__ import annotations

import datetime
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from django_eid import national_id, vocabulary
from django_eid.exceptions import InvalidNationalIdentityNumber
from django_eid.sandbox.broker import FAILED_STATUSES, failed_statuses
from django_eid.sandbox.persons import Person, Persons, custom_person
from django_eid.sandbox.wire import ERROR_STATUSES
from django_eid.vocabulary import PROVIDERS

CUSTOM = "CUSTOM"
IDENTIFY, ABORT, FAIL = "identify", "abort", "fail"
#: The fields describing "someone else".
CUSTOM_FIELDS = (
    "first_name",
    "middle_name",
    "last_name",
    "date_of_birth",
    "national_identity_number",
)


class LoginForm(forms.Form):
    """One form, three buttons (``action``); only *identify* needs a person."""

    action = forms.ChoiceField(
        choices=[(IDENTIFY, _("Identify")), (ABORT, _("Abort")), (FAIL, _("Fail"))]
    )
    provider = forms.ChoiceField(
        label=_("Identity provider"),
        choices=[("", _("The person's usual provider"))] + [(p, p) for p in PROVIDERS],
        required=False,
    )
    person = forms.ChoiceField(label=_("Test person"), widget=forms.RadioSelect, required=False)
    first_name = forms.CharField(label=_("First name"), max_length=100, required=False)
    middle_name = forms.CharField(label=_("Middle name"), max_length=100, required=False)
    last_name = forms.CharField(label=_("Last name"), max_length=100, required=False)
    date_of_birth = forms.DateField(
        label=_("Date of birth"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    national_identity_number = forms.CharField(
        label=_("National identity number"),
        help_text=_(
            "A Norwegian, Swedish, Danish or Finnish number, in the format of the provider's "
            "country; leave empty to have one made up from the date of birth."
        ),
        required=False,
        max_length=20,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    error_status = forms.ChoiceField(
        label=_("Error status"), choices=[(s, s) for s in ERROR_STATUSES], required=False
    )
    #: How the record reads after the failure (the API's own spelling of each is its
    #: wire layer's concern).
    record_status = forms.ChoiceField(
        label=_("Session status"), choices=[(s, s) for s in FAILED_STATUSES], required=False
    )

    def __init__(self, *args: Any, persons: Persons, api: str = "v1", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.persons = persons
        statuses = self.fields["record_status"]
        assert isinstance(statuses, forms.ChoiceField)
        statuses.choices = [(s, s) for s in failed_statuses(api)]
        person_field = self.fields["person"]
        assert isinstance(person_field, forms.ChoiceField)
        person_field.choices = [(p.key, p.name) for p in persons] + [
            (CUSTOM, _("Someone else (type the details below)"))
        ]
        person_field.initial = persons[0].key

    def custom_fields(self) -> list[forms.BoundField]:
        """The bound fields of "someone else", for the template."""
        return [self[name] for name in CUSTOM_FIELDS]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") != IDENTIFY:
            return data
        if not data.get("person"):
            if "person" not in self.errors:
                self.add_error("person", _("Choose who to identify as."))
            return data
        if data["person"] != CUSTOM:
            return data
        for name in ("first_name", "last_name", "date_of_birth"):
            if not data.get(name) and name not in self.errors:
                self.add_error(name, _("Required for someone else."))
        born = data.get("date_of_birth")
        # Every country's format encodes births from 1900 to today.
        if born and not (datetime.date(1900, 1, 1) <= born <= datetime.date.today()):
            self.add_error("date_of_birth", _("Between 1900 and today."))
        number = data.get("national_identity_number")
        if number:
            country = vocabulary.provider_country(data.get("provider"))
            try:
                data["national_identity_number"] = national_id.parse(number, country=country).number
            except InvalidNationalIdentityNumber:
                self.add_error(
                    "national_identity_number",
                    _("This is not a valid national identity number of the provider's country."),
                )
        return data

    def chosen_person(self) -> Person:
        """The person to identify as (call after ``is_valid()``)."""
        data = self.cleaned_data
        if data["person"] != CUSTOM:
            person = self.persons.get(data["person"])
            assert person is not None  # the field's choices are the persons
            return person
        return custom_person(
            first_name=data["first_name"],
            middle_name=data["middle_name"] or None,
            last_name=data["last_name"],
            birth_date=data["date_of_birth"],
            national_identity_number=data["national_identity_number"] or None,
            identity_provider=data.get("provider") or "NO_BANKID_WEB",
        )
