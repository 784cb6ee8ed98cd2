"""``BROKER_API = "v2"`` (``django_eid.brokers.v2``)."""
