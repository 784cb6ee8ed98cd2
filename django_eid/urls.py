"""URLs of django-eid. Include them with ``path("eid/", include("django_eid.urls"))``.

The HTML flow at the top level, the JSON API (:mod:`django_eid.api`) under ``api/``.
"""

from django.urls import path

from django_eid import api, views

app_name = "django_eid"

urlpatterns = [
    path("start/", views.StartView.as_view(), name="start"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("signup/", views.SignupView.as_view(), name="signup"),
    path("frame/<str:reference>/", views.FrameView.as_view(), name="frame"),
    path("status/<str:reference>/", views.StatusView.as_view(), name="status"),
    path("return/<str:reference>/success/", views.SuccessView.as_view(), name="success"),
    path("return/<str:reference>/abort/", views.AbortView.as_view(), name="abort"),
    path("return/<str:reference>/error/", views.ErrorView.as_view(), name="error"),
    # OpenID Connect's one redirect URI (BROKER_API "oidc"): register it at the provider.
    path("oidc/callback/", views.OidcCallbackView.as_view(), name="oidc-callback"),
    path("result/<str:reference>/", views.ResultView.as_view(), name="result"),
    path("resume/<str:token>/", views.ResumeView.as_view(), name="resume"),
    path("links/", views.LinksView.as_view(), name="links"),
    path("api/identifications/", api.StartView.as_view(), name="api-start"),
    path(
        "api/identifications/<str:reference>/",
        api.IdentificationView.as_view(),
        name="api-identification",
    ),
    path(
        "api/identifications/<str:reference>/cancel/", api.CancelView.as_view(), name="api-cancel"
    ),
    path(
        "api/identifications/<str:reference>/return/", api.ReturnView.as_view(), name="api-return"
    ),
    path("api/me/", api.MeView.as_view(), name="api-me"),
    path("api/links/", api.LinksView.as_view(), name="api-links"),
    # Any segment: one that is not a link's id is a JSON 404 too, as another user's link.
    path("api/links/<str:pk>/", api.LinkView.as_view(), name="api-link"),
    path("api/schema/", api.SchemaView.as_view(), name="api-schema"),
]
