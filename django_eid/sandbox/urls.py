"""URLs of the sandbox broker.

Mount with ``path("eid-sandbox/", include("django_eid.sandbox.urls"))`` and set both
``DJANGO_EID["AUTH_URL"]`` and ``DJANGO_EID["BASE_URL"]`` to
``http://127.0.0.1:8000/eid-sandbox``.
"""

from django.urls import path

from django_eid.sandbox import views
from django_eid.vocabulary import INVALIDATE_PATH, SESSION_PATH, STATUS_PATH, TOKEN_PATH

app_name = "django_eid_sandbox"

urlpatterns = [
    path(TOKEN_PATH.lstrip("/"), views.TokenView.as_view(), name="token"),
    path(SESSION_PATH.lstrip("/"), views.SessionView.as_view(), name="session"),
    path(STATUS_PATH.lstrip("/"), views.SessionStatusView.as_view(), name="status"),
    path(INVALIDATE_PATH.lstrip("/"), views.InvalidateView.as_view(), name="invalidate"),
    path("login/<str:request_id>/", views.LoginView.as_view(), name="login"),
    path("web-messaging.js", views.WebMessagingScriptView.as_view(), name="web-messaging"),
]
