"""Settings of ``benchmarks.million``'s ``eid_reencrypt`` run: a key rotation.

``tests.settings`` with a new key first in ``ENCRYPTION_KEYS`` and the key the rows were
encrypted under (derived from ``SECRET_KEY``) after it, as a rotation is deployed.
"""

from __future__ import annotations

from cryptography.fernet import Fernet

from django_eid.crypto import derived_key
from tests.settings import *  # noqa: F403
from tests.settings import DJANGO_EID, SECRET_KEY

DJANGO_EID = {
    **DJANGO_EID,
    "ENCRYPTION_KEYS": [Fernet.generate_key().decode(), derived_key(SECRET_KEY)],
}
