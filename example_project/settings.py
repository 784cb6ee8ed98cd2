"""Settings of the example project.

Everything that differs between a laptop and a real deployment comes from the
environment or from ``example_project/.env`` (see ``.env.example`` next to this
file, which documents every variable). With neither, the site runs with
``DEBUG=True`` on SQLite against the sandbox broker embedded in django-eid, so
``python manage.py migrate && python manage.py runserver`` is all it takes.

Switching to the real broker is only environment variables: set
``EID_BASE_URL``, ``EID_AUTH_URL``, ``EID_CLIENT_ID`` and ``EID_CLIENT_SECRET``
and the sandbox is neither installed nor mounted.
"""

from __future__ import annotations

from pathlib import Path

import environ

PROJECT_DIR = Path(__file__).resolve().parent
BASE_DIR = PROJECT_DIR.parent

env = environ.Env()
# Real environment variables win over the file.
environ.Env.read_env(env.str("ENV_FILE", default=str(PROJECT_DIR / ".env")), overwrite=False)

DEBUG = env.bool("DEBUG", default=True)

# A fixed key is fine on a laptop; a deployment (DEBUG=False) must bring its own.
SECRET_KEY = (
    env.str("SECRET_KEY", default="django-insecure-example-project-only-for-local-demos")
    if DEBUG
    else env.str("SECRET_KEY")
)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

# -- The identification broker ---------------------------------------------
# Without EID_BASE_URL the embedded sandbox plays the broker, served by this
# very site under /eid-sandbox/. EID_SANDBOX_URL is where the server reaches
# it (change the port if you run the server on another one).
EID_SANDBOX = not env.str("EID_BASE_URL", default="")
EID_SANDBOX_URL = env.str("EID_SANDBOX_URL", default="http://127.0.0.1:8000/eid-sandbox")

# "v1", "v2", "eid-hub" or "oidc": the sandbox speaks each (docs/guides/broker-api.md).
EID_BROKER_API = env.str("EID_BROKER_API", default="v1")
EID_HUB = EID_BROKER_API == "eid-hub"
# With "oidc": the broker's preset, and its issuer (the sandbox's local OpenID provider
# of that preset by default).
EID_OIDC = EID_BROKER_API == "oidc"
EID_OIDC_PRESET = env.str("EID_OIDC_PRESET", default="idura" if EID_OIDC else "") or None

DJANGO_EID = {
    "BROKER_API": EID_BROKER_API,
    # The eID Hub's account (only that API has one).
    "ACCOUNT_ID": env.str("EID_ACCOUNT_ID", default="a-sandbox" if EID_SANDBOX and EID_HUB else "")
    or None,
    "CLIENT_ID": env.str("EID_CLIENT_ID", default="sandbox-client" if EID_SANDBOX else ""),
    "CLIENT_SECRET": env.str("EID_CLIENT_SECRET", default="sandbox-secret" if EID_SANDBOX else ""),
    "BASE_URL": env.str("EID_BASE_URL", default=EID_SANDBOX_URL),
    "AUTH_URL": env.str("EID_AUTH_URL", default=EID_SANDBOX_URL if EID_SANDBOX else ""),
    "OIDC_PRESET": EID_OIDC_PRESET,
    "OIDC_ISSUER": env.str(
        "EID_OIDC_ISSUER",
        default=f"{EID_SANDBOX_URL}/oidc/{EID_OIDC_PRESET}" if EID_SANDBOX and EID_OIDC else "",
    )
    or None,
    "IDENTITY_PROVIDER": env.str("EID_IDENTITY_PROVIDER", default="") or None,
    # On with the sandbox, so the account page can show the (masked) national identity
    # number; off against a real broker, where the number costs extra and needs permission.
    "GET_SOCIAL_SECURITY_NUMBER": env.bool("EID_GET_SOCIAL_SECURITY_NUMBER", default=EID_SANDBOX),
    "SUCCESS_URL": "account",
    # Signing up with an eID (the "Sign up with eID" page, or logging in as a person without an
    # account): "form" (default) asks for a username and an e-mail address, "auto" makes the
    # account at once, "closed" only says that no account is linked to the eID.
    "SIGNUP": env.str("EID_SIGNUP", default="form"),
    # Identifications started through the JSON API (the single-page app at /spa/) come back
    # to it; the page asks the API how they went.
    "FRONTEND_URLS": {
        "success": "/spa/?reference={reference}",
        "abort": "/spa/?reference={reference}",
        "error": "/spa/?reference={reference}",
    },
}

# -- Applications ------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_eid",
    *(["django_eid.sandbox"] if EID_SANDBOX else []),
    "example_project.accounts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Before the apps' own templates: the site's look for django-eid's pages too.
        "DIRS": [PROJECT_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# -- Data ----------------------------------------------------------------------
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{PROJECT_DIR / 'db.sqlite3'}"),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# CACHE_URL (any django-environ cache URL) wins; REDIS_URL is a shortcut.
# django-eid keeps its access token here; with several worker processes, use
# a shared cache (Redis) so they share one token.
_redis_url = env.str("REDIS_URL", default="")
CACHES = {"default": env.cache("CACHE_URL", default=_redis_url or "locmemcache://")}

# -- Authentication -------------------------------------------------------------
# A password (ModelBackend), or an eID linked to the account (the login page's "Log in with
# BankID" and the "Sign up with eID" page: django-eid's backend answers only for an
# identification this browser just finished at its login page).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "django_eid.backends.EidBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "django_eid:start"  # "Verify my identity"
LOGOUT_REDIRECT_URL = "home"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# -- Internationalisation -------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [
    ("en", "English"),
    ("nb", "Norsk bokmål"),
    ("sv", "Svenska"),
    ("da", "Dansk"),
    ("fi", "Suomi"),
]
USE_I18N = True
# The site's own texts (templates, views, the receiver's reason), like django-eid's own
# catalogs: example_project/locale, refreshed with `make messages`.
LOCALE_PATHS = [PROJECT_DIR / "locale"]
USE_TZ = True
TIME_ZONE = env.str("TIME_ZONE", default="Europe/Oslo")

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "static"

# -- Production hardening (active when DEBUG=False) -----------------------------
if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    SECURE_CONTENT_TYPE_NOSNIFF = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_eid": {"handlers": ["console"], "level": "INFO"}},
}
