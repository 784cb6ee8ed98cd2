"""django-eid: identify a Django site's users through an electronic-identity broker."""

__version__ = "0.1.0"
