"""The signals of django-eid: the site's way to act on an identification.

Every signal is sent with ``sender=Identification`` (the model class) and
these keyword arguments:

- ``identification``: the :class:`~django_eid.models.Identification` row, already
  committed to the database;
- ``user``: the user it belongs to (``identification.user``);
- ``request``: the ``HttpRequest`` being answered.

A receiver that raises is logged and does not undo what was stored, with one
exception: a receiver of ``identification_succeeded`` may raise
:class:`~django_eid.exceptions.IdentificationRejected` to refuse the identity.
"""

import logging

from django.dispatch import Signal

# A session was created at the broker and the user is on the way there.
# Arguments: identification, user, request.
identification_started = Signal()

# The broker confirmed the user's identity; the verified fields are stored.
# Raise IdentificationRejected("reason") to refuse it (status becomes REJECTED,
# the user sees the reason, and identification_failed follows).
# Arguments: identification, user, request.
identification_succeeded = Signal()

# The user cancelled at the broker. Arguments: identification, user, request.
identification_aborted = Signal()

# The identification failed: broker error, a refused record status, or a
# rejection (status ERROR or REJECTED; see error_status/error_code/error_message).
# Arguments: identification, user, request.
identification_failed = Signal()


class HideRejections(logging.Filter):
    """Drop ``django.dispatch``'s error record for an ``IdentificationRejected``.

    ``send_robust`` logs every exception a receiver raises at ERROR level, with
    its message. A rejection is an answer, not an error, and its reason may
    describe the person; django-eid logs the rejection itself, without it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        from django_eid.exceptions import IdentificationRejected

        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, IdentificationRejected)


hide_rejections = HideRejections()
