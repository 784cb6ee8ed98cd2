"""``BROKER_API = "v1"`` (``django_eid.brokers.v1``)."""
