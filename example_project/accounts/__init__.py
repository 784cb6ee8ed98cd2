"""The example site's own accounts app: a profile, and a receiver of django-eid's signal."""
