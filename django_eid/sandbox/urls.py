"""URLs of the sandbox broker: the v1 API, Express identification v2, the eID Hub and the
OpenID provider (issuer ``<mount>/oidc/<preset>``, e.g. ``http://127.0.0.1:8000/eid-sandbox/oidc/idura``).

The three APIs' paths do not collide, so one mounted sandbox serves all three (and one
login page ends the sessions of each, through the wire layer of the API that created it).
Mount with ``path("eid-sandbox/", include("django_eid.sandbox.urls"))`` and set both
``DJANGO_EID["AUTH_URL"]`` and ``DJANGO_EID["BASE_URL"]`` to
``http://127.0.0.1:8000/eid-sandbox``.
"""

from django.urls import path

from django_eid.sandbox import views
from django_eid.sandbox.apis import HUB_SESSIONS_PATH as HUB_SESSIONS
from django_eid.sandbox.apis import HUB_TOKEN_PATH
from django_eid.sandbox.apis import V2_SESSIONS_PATH as V2_SESSIONS
from django_eid.vocabulary import INVALIDATE_PATH, SESSION_PATH, STATUS_PATH, TOKEN_PATH

app_name = "django_eid_sandbox"

urlpatterns = [
    path(TOKEN_PATH.lstrip("/"), views.TokenView.as_view(), name="token"),
    path(SESSION_PATH.lstrip("/"), views.SessionView.as_view(), name="session"),
    path(STATUS_PATH.lstrip("/"), views.SessionStatusView.as_view(), name="status"),
    path(INVALIDATE_PATH.lstrip("/"), views.InvalidateView.as_view(), name="invalidate"),
    # Express identification v2 (its token endpoint is v1's).
    path(V2_SESSIONS.lstrip("/"), views.V2SessionsView.as_view(), name="v2-sessions"),
    path(
        V2_SESSIONS.lstrip("/") + "/<str:session_id>",
        views.V2SessionView.as_view(),
        name="v2-session",
    ),
    path(
        V2_SESSIONS.lstrip("/") + "/<str:session_id>/invalidate",
        views.V2InvalidateView.as_view(),
        name="v2-invalidate",
    ),
    # The eID Hub Authentication REST API.
    path(HUB_TOKEN_PATH.lstrip("/"), views.HubTokenView.as_view(), name="hub-token"),
    path(HUB_SESSIONS.lstrip("/"), views.HubSessionsView.as_view(), name="hub-sessions"),
    path(
        HUB_SESSIONS.lstrip("/") + "/<str:session_id>",
        views.HubSessionView.as_view(),
        name="hub-session",
    ),
    path(
        HUB_SESSIONS.lstrip("/") + "/<str:session_id>/cancel",
        views.HubCancelView.as_view(),
        name="hub-cancel",
    ),
    # The OpenID provider, one issuer per preset: <mount>/oidc/<preset>.
    path(
        "oidc/<str:preset>/.well-known/openid-configuration",
        views.OidcDiscoveryView.as_view(),
        name="oidc-discovery",
    ),
    path("oidc/<str:preset>/jwks", views.OidcJwksView.as_view(), name="oidc-jwks"),
    path("oidc/<str:preset>/authorize", views.OidcAuthorizeView.as_view(), name="oidc-authorize"),
    path("oidc/<str:preset>/par", views.OidcParView.as_view(), name="oidc-par"),
    path("oidc/<str:preset>/token", views.OidcTokenView.as_view(), name="oidc-token"),
    path("oidc/<str:preset>/userinfo", views.OidcUserinfoView.as_view(), name="oidc-userinfo"),
    path("login/<str:request_id>/", views.LoginView.as_view(), name="login"),
    path("web-messaging.js", views.WebMessagingScriptView.as_view(), name="web-messaging"),
]
