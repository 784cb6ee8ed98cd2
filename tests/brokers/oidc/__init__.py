"""``BROKER_API = "oidc"`` (``django_eid.brokers.oidc``, ``oidc_presets``)."""
