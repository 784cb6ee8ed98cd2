from django.urls import path

app_name = "django_eid_sandbox"
urlpatterns: list = []
