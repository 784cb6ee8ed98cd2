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

# Sent when a session was created at the broker and the user is on the way there,
# after the PENDING row (with its request_id) is committed.
#   sender: the Identification class
#   identification: the Identification row (status PENDING)
#   user: identification.user
#   request: the HttpRequest of the start POST
identification_started = Signal()

# Sent when the broker confirmed the user's identity, after the SUCCESS row with the
# verified fields is committed. Raise IdentificationRejected("reason") to refuse it:
# the status becomes REJECTED, the user sees the reason, identification_failed follows.
#   sender: the Identification class
#   identification: the Identification row (status SUCCESS)
#   user: identification.user
#   request: the HttpRequest of the callback
identification_succeeded = Signal()

# Sent when the user cancelled at the broker, after the ABORTED row is committed.
#   sender: the Identification class
#   identification: the Identification row (status ABORTED)
#   user: identification.user
#   request: the HttpRequest of the callback
identification_aborted = Signal()

# Sent when the identification produced no accepted identity (the broker's Error URL,
# a record status other than SUCCESS, or a rejection), after the ERROR or REJECTED row
# is committed; error_status, error_code and error_message say why. Not sent when the
# start itself fails: the user is then still on the site.
#   sender: the Identification class
#   identification: the Identification row (status ERROR or REJECTED)
#   user: identification.user
#   request: the HttpRequest of the callback
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
