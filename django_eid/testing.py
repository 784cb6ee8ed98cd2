"""pytest plugin of django-eid (the eid_broker fixture)."""
