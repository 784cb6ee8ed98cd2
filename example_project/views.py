"""The example site's pages. django-eid provides the flow and the gates; these only show
its results and put two pages behind gates."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.generic import TemplateView

from django_eid.conf import eid_settings
from django_eid.decorators import eid_required
from django_eid.models import Identification
from example_project.accounts.models import Profile

#: How many past attempts the account page lists.
ATTEMPTS_SHOWN = 20


def _profile(user: Any) -> Profile | None:
    if not user.is_authenticated:
        return None
    return Profile.objects.filter(user_id=user.pk).first()


class HomeView(TemplateView):
    template_name = "home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["profile"] = _profile(self.request.user)
        return context


class SignupView(TemplateView):
    """The "Sign up with eID" page: what signing up here means, and the button that starts it.

    The button posts to django-eid's login page with ``purpose=signup``; what follows is
    django-eid's, as the ``SIGNUP`` setting says (``EID_SIGNUP``): its sign-up form, an
    account at once, or its page saying that no account is linked. A person whose eID is
    linked to an account already is logged in to it.
    """

    template_name = "signup.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["signup_mode"] = eid_settings.SIGNUP
        return context


class AccountView(LoginRequiredMixin, TemplateView):
    """The verified identity (django-eid's ``SUCCESS_URL``) and the past attempts."""

    template_name = "account.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        assert user.is_authenticated  # LoginRequiredMixin
        context["profile"] = _profile(user)
        context["identity"] = Identification.objects.verified_for(user)
        context["attempts"] = Identification.objects.filter(user_id=user.pk).order_by(
            "-created_at"
        )[:ATTEMPTS_SHOWN]
        return context


class PayoutForm(forms.Form):
    account = forms.RegexField(
        label=_("Account number"),
        regex=r"^[0-9]{4}\.?[0-9]{2}\.?[0-9]{5}\Z",
        error_messages={"invalid": _("Enter an 11-digit account number, e.g. 1234.56.78903.")},
    )


@eid_required(max_age=300, same_person=True)
def payout(request: HttpRequest) -> HttpResponse:
    """Where the site pays the user: only the account's person, verified in the last 5 minutes.

    A form sent after those 5 minutes is kept while the user verifies again, then sent again.
    """
    profile, _created = Profile.objects.get_or_create(user_id=request.user.pk)
    form = PayoutForm(request.POST or None, initial={"account": profile.payout_account})
    if request.method == "POST" and form.is_valid():
        profile.payout_account = form.cleaned_data["account"]
        profile.save(update_fields=["payout_account"])
        messages.success(request, gettext("Payout account changed."))
        return HttpResponseRedirect(reverse("payout"))
    return TemplateResponse(request, "payout.html", {"form": form, "profile": profile})


@eid_required(min_age=18)
def wine_shop(request: HttpRequest) -> HttpResponse:
    """For adults only: a verified identity that shows the person is 18 or older."""
    identity = Identification.objects.verified_for(request.user, min_age=18)
    return TemplateResponse(request, "wine_shop.html", {"identity": identity})


@method_decorator(ensure_csrf_cookie, name="dispatch")
class SpaView(TemplateView):
    """A front end of its own on one page: plain JavaScript over django-eid's JSON API.

    Not behind a login: the API answers 401 to an anonymous visitor, and the page offers
    the login link then, as a single-page app would.
    """

    template_name = "spa.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["api"] = reverse("django_eid:api-schema").removesuffix("schema/")
        context["texts"] = {
            "verified": gettext("Your identity is verified."),
            "not_verified": gettext("Your identity is not verified yet."),
            "starting": gettext("Starting…"),
            "framed": gettext("Identify yourself in the frame below."),
        }
        return context
