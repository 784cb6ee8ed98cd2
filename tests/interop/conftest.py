"""The interoperability run's collection: without Playwright (tox installs the ``test``
extra alone) the browser tests here cannot even be imported, as in ``tests/browser``; without
django-oauth-toolkit they are skipped with a reason (and fail where the browser tier is
required, ``EID_REQUIRE_BROWSER=1``)."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("playwright") else ["test_oidc_provider.py"]
