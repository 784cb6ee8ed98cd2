"""The example site's pages. django-eid provides the flow; these only show its results."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

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


class VerifyView(LoginRequiredMixin, TemplateView):
    """ "Verify my identity": two buttons that POST to django-eid's start view."""

    template_name = "verify.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["identity"] = Identification.objects.verified_for(self.request.user)
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
