"""A site's own sign-up view that requires a verified identity (the guide's example)."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.contrib.auth import get_user_model, login
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path
from django.views import View

import django_eid
from django_eid.exceptions import BindRefused


class OwnSignupForm(forms.Form):
    username = forms.CharField(max_length=150)
    password = forms.CharField(widget=forms.PasswordInput)


class OwnSignupView(View):
    """Only for a person this browser verified with an eID; the account gets a password."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]  # type: ignore[misc]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        self.identification = django_eid.pending_identification(request)
        if self.identification is None:
            return HttpResponseRedirect("/eid/login/?purpose=signup")
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.page(OwnSignupForm())

    def page(self, form: OwnSignupForm, error: str = "", status: int = 200) -> HttpResponse:
        context = {"form": form, "name": self.identification.name, "error": error}
        return render(
            request=self.request,
            template_name="door/own_signup.html",
            context=context,
            status=status,
        )

    def post(self, request: HttpRequest) -> HttpResponse:
        form = OwnSignupForm(request.POST)
        if not form.is_valid():
            return self.page(form, status=400)
        try:
            with transaction.atomic():
                user = get_user_model().objects.create_user(
                    form.cleaned_data["username"],
                    password=form.cleaned_data["password"],
                    first_name=self.identification.first_name,
                    last_name=self.identification.last_name,
                )
                django_eid.bind_pending_identification(request, user)
        except BindRefused as refused:
            return self.page(form, error=refused.code, status=409)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return HttpResponseRedirect("/welcome/")


urlpatterns = [path("", OwnSignupView.as_view(), name="own-signup")]
