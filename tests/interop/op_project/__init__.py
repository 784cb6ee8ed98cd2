"""An independent OpenID provider for the interoperability run (``tests/interop``).

A minimal Django project of its own, built on django-oauth-toolkit: started by the tests as
a separate process (:mod:`.serve`) on loopback over TLS, with nothing of django-eid in it.
Its settings come from a JSON file the tests write (``OP_CONFIG``): the database, the
signing keys, the registered clients and which claim layout each gets, the person.
"""
