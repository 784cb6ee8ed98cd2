"""A small site that uses django-eid: the demo and the real-browser tests run it."""
