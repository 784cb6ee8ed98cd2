"""Settings of the test suite.

SQLite and local-memory caches by default; with ``DATABASE_URL`` and
``EID_TEST_REDIS_URL`` set, PostgreSQL and Redis (the production tier).
"""

from __future__ import annotations

import os
from pathlib import Path

import django
import environ

from tests.parallel import worker_redis_url

env = environ.Env()

SECRET_KEY = "test-secret-key-not-for-production-0123456789abcdef"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "Europe/Oslo"
LANGUAGE_CODE = "en"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_eid",
    "django_eid.sandbox",
    # tests/api: API_AUTHENTICATION_CLASSES with REST framework's TokenAuthentication.
    "rest_framework",
    "rest_framework.authtoken",
]

MIDDLEWARE = [
    # Fails the test whose JSON API answer the shipped OpenAPI document does not describe.
    "tests.openapi_check.OpenAPIResponseCheck",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tests.urls"

# Logging in by eID (tests/door/) beside passwords.
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "django_eid.backends.EidBackend",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).resolve().parent / "door" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL", default="sqlite:///:memory:")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": ""}

REDIS_URL = env.str("EID_TEST_REDIS_URL", default="")
# pytest-xdist's workers each get a Redis database of their own (a test clears the whole
# database; pytest-django gives each its own PostgreSQL database the same way):
# .ci/services.sh starts Redis with the databases this takes.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if REDIS_URL and XDIST_WORKER:
    REDIS_URL = worker_redis_url(REDIS_URL, XDIST_WORKER)
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
}

# Django 6.1 deprecates EMAIL_BACKEND and warns when mail is sent without MAILERS (the
# privacy tests send mail to ADMINS); the test environment swaps in the local-memory
# backend either way.
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STATIC_URL = "/static/"
LOGIN_URL = "/login/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DJANGO_EID = {
    "CLIENT_ID": "test-client",
    "CLIENT_SECRET": "test-secret-s3cr3t-value",
    "BASE_URL": "https://api.broker.test",
    "AUTH_URL": "https://auth.broker.test",
    "SCOPES": ["identify"],
}

# tests/gates/views.py: the EidVerified permission answers JSON only.
REST_FRAMEWORK = {"DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]}
