from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("eid/", include("django_eid.urls")),
    path("eid-sandbox/", include("django_eid.sandbox.urls")),
    path("gated/", include("tests.gates.views")),
    path("own-signup/", include("tests.door.views")),
]
