from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    # The issuer is https://127.0.0.1:<port>/o (discovery, authorize, token, userinfo, JWKS).
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", LoginView.as_view(), name="login"),
]
