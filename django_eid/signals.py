"""The signals of django-eid: the site's way to act on an identification.

Every signal is sent with ``sender=Identification`` (the model class) and
these keyword arguments:

- ``identification``: the :class:`~django_eid.models.Identification` row, already
  committed to the database (``identification_verifying``: about to be);
- ``user``: the user it belongs to (``identification.user``);
- ``request``: the ``HttpRequest`` being answered, or ``None`` when the identification is
  finished outside a request (a management command, a task); receivers must cope with both;
- ``purpose``: what the identification is for: ``"verify"`` (a logged-in user's identity),
  ``"login"`` (a visitor logging in), ``"signup"`` (a visitor signing up, or an account
  created or bound for the person: :func:`django_eid.bind_pending_identification`).

At the door (``purpose`` ``"login"`` or ``"signup"``) ``user`` is ``None`` until the person's
account is known: ``identification_verifying`` may see ``None`` (a person without an
account, about to sign up), and ``identification_succeeded`` is sent when the account is
known: when it finishes for a linked person, else when it is bound to the account created
for them (``purpose="signup"``).

Site rules belong in ``identification_verifying``: a receiver raising
:class:`~django_eid.exceptions.IdentificationRejected` there refuses the identity before
anyone can see it verified. The other signals are for side effects: a receiver that raises
is logged and does not undo what was stored (a receiver of ``identification_succeeded`` may
still raise ``IdentificationRejected``, for compatibility, which rejects the identity after
it was briefly visible as verified).
"""

import logging

from django.dispatch import Signal

# Sent when a session was created at the broker and the user is on the way there,
# after the PENDING row (with its request_id) is committed.
#   sender: the Identification class
#   identification: the Identification row (status PENDING)
#   user: identification.user
#   request: the HttpRequest of the start, or None when started outside a request
identification_started = Signal()

# Sent when the broker confirmed the user's identity, inside the database transaction
# that records it as SUCCESS, before it commits: no other request can see the row verified
# yet. The place for the site's rules. Raise IdentificationRejected("reason") to refuse
# the identity: the transaction's writes since the SUCCESS (the receivers' own included) are
# rolled back, the row is committed as REJECTED with the reason, the user sees it, and
# identification_failed follows. A receiver raising anything else also refuses it (status
# ERROR, error_code RULES_FAILED): a rule that cannot run does not let anyone through.
#   sender: the Identification class
#   identification: the Identification row (status SUCCESS, not yet committed)
#   user: identification.user
#   request: the HttpRequest of the callback, or None outside a request
identification_verifying = Signal()

# Sent when the broker confirmed the user's identity and the site's rules accepted it,
# after the SUCCESS row with the verified fields is committed: for side effects (a profile,
# an e-mail). Raising IdentificationRejected("reason") here still refuses the identity
# (REJECTED, identification_failed follows), but only after the commit: put rules in
# identification_verifying instead.
#   sender: the Identification class
#   identification: the Identification row (status SUCCESS)
#   user: identification.user
#   request: the HttpRequest of the callback, or None outside a request
identification_succeeded = Signal()

# Sent when the user cancelled at the broker, after the ABORTED row is committed.
#   sender: the Identification class
#   identification: the Identification row (status ABORTED)
#   user: identification.user
#   request: the HttpRequest of the callback, or None outside a request
identification_aborted = Signal()

# Sent when the identification produced no accepted identity (the broker's Error URL,
# a record status other than SUCCESS, or a rejection), after the ERROR or REJECTED row
# is committed; error_status, error_code and error_message say why. Not sent when the
# start itself fails: the user is then still on the site.
#   sender: the Identification class
#   identification: the Identification row (status ERROR or REJECTED)
#   user: identification.user
#   request: the HttpRequest of the callback, or None outside a request
identification_failed = Signal()


# Sent after a visitor was logged in by their eID (Django's login(), which sent
# user_logged_in before), with the identification that proved who they are.
#   sender: the Identification class
#   identification: the Identification row (status SUCCESS, purpose "login" or "signup")
#   user: the user now logged in
#   request: the HttpRequest of the login, or None
#   purpose: identification.purpose
eid_login = Signal()

# Sent after a verified identification without an account was bound to one (sign-up, or
# django_eid.bind_pending_identification), after identification_succeeded.
#   sender: the Identification class
#   identification: the Identification row (status SUCCESS), its user now set
#   user: that user
#   request: the HttpRequest of the sign-up, or None
#   purpose: "signup"
identification_bound = Signal()


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
