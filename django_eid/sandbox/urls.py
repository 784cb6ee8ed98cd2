
app_name = "django_eid_sandbox"
urlpatterns: list[object] = []
