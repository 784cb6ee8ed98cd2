"""URLs of the example project.

The sandbox broker is mounted only when its app is installed, which the
settings do exactly when no real broker (``EID_BASE_URL``) is configured.
"""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView

from example_project import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.HomeView.as_view(), name="home"),
    # "Verify my identity" is django-eid's start page with the site's template
    # (templates/django_eid/start.html): one page, where a cancel comes back to as well.
    path("verify/", RedirectView.as_view(pattern_name="django_eid:start"), name="verify"),
    path("account/", views.AccountView.as_view(), name="account"),
    path("payout/", views.payout, name="payout"),
    path("wine/", views.wine_shop, name="wine"),
    path("spa/", views.SpaView.as_view(), name="spa"),
    # The password form and "Log in with BankID" (django-eid's login page, posted to).
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("signup/", views.SignupView.as_view(), name="signup"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("eid/", include("django_eid.urls")),
    path("admin/", admin.site.urls),
]

if apps.is_installed("django_eid.sandbox"):
    urlpatterns.append(path("eid-sandbox/", include("django_eid.sandbox.urls")))
