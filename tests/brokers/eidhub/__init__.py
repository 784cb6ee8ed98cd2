"""``BROKER_API = "eid-hub"`` (``django_eid.brokers.eidhub``)."""
