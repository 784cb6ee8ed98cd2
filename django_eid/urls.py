"""URLs of django-eid. Include them with ``path("eid/", include("django_eid.urls"))``."""

from django.urls import path

from django_eid import views

app_name = "django_eid"

urlpatterns = [
    path("start/", views.StartView.as_view(), name="start"),
    path("frame/<str:reference>/", views.FrameView.as_view(), name="frame"),
    path("status/<str:reference>/", views.StatusView.as_view(), name="status"),
    path("return/<str:reference>/success/", views.SuccessView.as_view(), name="success"),
    path("return/<str:reference>/abort/", views.AbortView.as_view(), name="abort"),
    path("return/<str:reference>/error/", views.ErrorView.as_view(), name="error"),
    path("result/<str:reference>/", views.ResultView.as_view(), name="result"),
    path("resume/<str:token>/", views.ResumeView.as_view(), name="resume"),
]
