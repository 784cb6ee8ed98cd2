"""The identification flow, without HTTP: the whole lifecycle of an identification.

One module per use case, in the order an identification goes through them:

1. :mod:`~django_eid.flows.start` applies the rules of a start (provider, display,
   destination, the pending limit of :mod:`~django_eid.flows.pending`, the iframe's parent
   domain, the expected person), creates the session at the broker and stores the
   ``PENDING`` row.
2. The user identifies at the broker and comes back to one of the return URLs.
   :mod:`~django_eid.flows.returns` checks that the return belongs to this user (the
   row's owner) and to this browser (the front end says whether it holds the one-time
   reference), and that the ids the broker filled in are the row's.
3. :mod:`~django_eid.flows.finish` then finishes the row once, late or not: a ``SUCCESS``
   record passes the site's rules (:mod:`~django_eid.flows.rules`) *inside* the
   transaction that records it, so a rejected identity is never visible as ``SUCCESS``.
4. :mod:`~django_eid.flows.settle` finishes a row without the callback of its browser
   (another device, a closed tab, ``eid_reconcile``).

Front ends (the HTML views, the JSON API, the management commands) call these through
:mod:`django_eid.flow`, the stable import path, and map what they return, or the
:class:`~django_eid.flows.refused.Refused` they raise, to their own answers. Nothing here
needs an ``HttpRequest``; one is passed through to the signals when there is one. Names
the modules share among themselves (``finish.transition``, ``finish.send``, ...) are the
package's own, not API.
"""
