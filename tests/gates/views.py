"""Views behind django-eid's gates, for the tests of the decorator, the mixin and the DRF
permission (routed under ``/gated/`` by tests/urls.py, so every test of the suite has them)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from django_eid.contrib.drf import EidVerified
from django_eid.decorators import eid_required
from django_eid.mixins import EidRequiredMixin
from django_eid.requirements import Requirements


@eid_required
def any_verified(request: HttpRequest) -> HttpResponse:
    return HttpResponse("verified")


@eid_required(max_age=300, same_person=True)
def payout(request: HttpRequest) -> HttpResponse:
    """A form that must be sent by the account's person, verified in the last 5 minutes."""
    if request.method == "POST":
        return HttpResponse(f"saved {','.join(request.POST.getlist('account'))}")
    return HttpResponse("payout form")


@eid_required(min_age=18)
def adults(request: HttpRequest) -> HttpResponse:
    return HttpResponse("adults only")


@eid_required(max_age=300, min_loa="high")
def payout_account(request: HttpRequest) -> HttpResponse:
    """A sensitive action: verified in the last 5 minutes, at the high level of assurance."""
    return HttpResponse("payout account")


@eid_required(providers=["NO_BANKID_WEB"], message="Only BankID for this contract.")
def contract(request: HttpRequest) -> HttpResponse:
    return HttpResponse("contract")


@csrf_exempt
@eid_required(max_age=300)
def exempt_form(request: HttpRequest) -> HttpResponse:
    """A CSRF-exempt view: the gate must not keep a form that has no valid token."""
    return HttpResponse(f"exempt {request.method}")


@eid_required(keep_form=False)
def password_form(request: HttpRequest) -> HttpResponse:
    """A form with a password: not to be kept in the session over the verification."""
    return HttpResponse("changed")


@eid_required(login=True, max_age=300)
def door(request: HttpRequest) -> HttpResponse:
    """A page a visitor reaches by logging in with their eID, that same identification
    passing the gate."""
    return HttpResponse(f"door {request.eid_identification.pk}")  # type: ignore[attr-defined]


class DoorView(EidRequiredMixin, View):
    eid_login = True
    eid_min_age = 18

    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("door class")


class AdultsView(EidRequiredMixin, View):
    eid_min_age = 18

    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("adults (class)")


class HighLevelView(EidRequiredMixin, View):
    eid_min_loa = "high"

    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("high (class)")


class ChosenPerView(EidRequiredMixin, View):
    """Decides its requirements per request: ``?fresh=1`` asks for a recent verification."""

    def get_eid_requirements(self) -> Requirements:
        fresh = self.request.GET.get("fresh") == "1"
        return Requirements.of(max_age=60 if fresh else None)

    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("chosen")


class RecentlyVerified(EidVerified):
    max_age = 300
    next_url = "/app/payout"


class PayoutAPI(APIView):
    permission_classes = [IsAuthenticated, RecentlyVerified]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class AdultsAPI(APIView):
    class Adults(EidVerified):
        min_age = 18
        eid_message = "Adults only."

    permission_classes = [IsAuthenticated, Adults]

    def get(self, request: Request, *args: Any) -> Response:
        return Response({"adult": True})


class SubstantialAPI(APIView):
    class Substantial(EidVerified):
        min_loa = "substantial"

    permission_classes = [IsAuthenticated, Substantial]

    def get(self, request: Request) -> Response:
        return Response({"level": request.eid_identification.level_of_assurance})


urlpatterns = [
    path("any/", any_verified, name="any"),
    path("payout/", payout, name="payout"),
    path("adults/", adults, name="adults"),
    path("payout-account/", payout_account, name="payout-account"),
    path("contract/", contract, name="contract"),
    path("exempt/", exempt_form, name="exempt"),
    path("password/", password_form, name="password"),
    path("door/", door, name="door"),
    path("class/door/", DoorView.as_view(), name="class-door"),
    path("class/adults/", AdultsView.as_view(), name="class-adults"),
    path("class/high/", HighLevelView.as_view(), name="class-high"),
    path("class/chosen/", ChosenPerView.as_view(), name="class-chosen"),
    path("api/payout/", PayoutAPI.as_view(), name="api-payout"),
    path("api/adults/", AdultsAPI.as_view(), name="api-adults"),
    path("api/substantial/", SubstantialAPI.as_view(), name="api-substantial"),
]
