"""The successor APIs' calls over the one :class:`~django_eid.sandbox.broker.SandboxBroker`.

Each class turns what arrived (header, query, body, the id in the path) into calls of
the shared behaviour and renders the answer with its API's wire layer
(:mod:`~django_eid.sandbox.wire_v2`, :mod:`~django_eid.sandbox.wire_eidhub`). The two
faces of the sandbox (the Django views and the ``eid_broker`` fixture) call these, as
they call the broker itself for v1.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Final
from urllib.parse import parse_qsl

from django_eid.brokers import eidhub
from django_eid.brokers.eidhub import EidHubApi
from django_eid.brokers.v2 import V2Api
from django_eid.sandbox import wire_eidhub, wire_v2
from django_eid.sandbox.broker import SandboxBroker, SessionFinished, UnknownSession
from django_eid.sandbox.wire import MAX_FIELDS, Refused, Reply, Session

#: The successors' paths, under ``BASE_URL`` (sessions) and ``AUTH_URL`` (the hub's token):
#: the client's, so that both sides name them once.
V2_SESSIONS_PATH: Final = V2Api.sessions_path
HUB_SESSIONS_PATH: Final = EidHubApi.sessions_path
HUB_TOKEN_PATH: Final = EidHubApi.token_path

#: How many of a client's v2 sessions the list call can show.
MAX_LISTED: Final = 500


def _index_key(client_id: str) -> str:
    return "v2-index:" + hashlib.sha256(client_id.encode()).hexdigest()[:40]


#: The query parameter naming the hub account (optional, checked when given).
ACCOUNT_PARAM: Final = eidhub.ACCOUNT_PARAM


class V2Sandbox:
    """Express identification v2: ``/identification/v2/sessions``; tokens as v1's."""

    def __init__(self, broker: SandboxBroker) -> None:
        self.broker = broker

    def render(self, session: Session) -> dict[str, object]:
        return wire_v2.render(session, self.broker.login_url(session.request_id))

    def create_session(self, *, authorization: str | None, body: bytes) -> Reply:
        """``POST /identification/v2/sessions``: 201 with the session resource."""
        try:
            client_id = self.broker.authorize(authorization)
            request, echo = wire_v2.parse_create_request(body)
        except Refused as refused:
            return refused.reply
        session = self.broker.start(
            client_id,
            request,
            api=wire_v2.API,
            wire=echo,
            session_id=lambda: uuid.uuid4().hex,
            login_lifetime=wire_v2.LOGIN_LIFETIME,
            identity_lifetime=wire_v2.IDENTITY_LIFETIME,
            lifetime=wire_v2.SESSION_LIFETIME,
        )
        self._index(client_id, session.request_id)
        return Reply(201, self.render(session))

    def _index(self, client_id: str, session_id: str) -> None:
        # Caches cannot list their keys: the list call reads this index of the client's ids.
        key = _index_key(client_id)
        ids = [*(self.broker.store.get(key) or {}).get("ids", []), session_id][-MAX_LISTED:]
        self.broker.store.set(key, {"ids": ids}, wire_v2.SESSION_LIFETIME)

    def list_sessions(self, *, authorization: str | None, query: str) -> Reply:
        """``GET /identification/v2/sessions?cursor=&limit=``: the client's finished
        sessions, newest first, without personal data (active ones are not listed)."""
        try:
            client_id = self.broker.authorize(authorization)
            offset, limit = wire_v2.parse_list_query(query)
        except Refused as refused:
            return refused.reply
        ids = (self.broker.store.get(_index_key(client_id)) or {}).get("ids", [])
        found = (self.broker.session(session_id) for session_id in reversed(ids))
        finished = [s for s in found if s is not None and not s.in_progress]
        page = finished[offset : offset + limit]
        more = offset + limit < len(finished)
        body = {
            "limit": limit,
            "nextCursor": wire_v2.cursor(offset + limit) if more else None,
            "data": [wire_v2.summary(session) for session in page],
        }
        return Reply(200, body)

    def _own(self, authorization: str | None, session_id: str) -> Session:
        client_id = self.broker.authorize(authorization)
        session = self.broker.session(session_id)
        if session is None or session.client_id != client_id or session.api != wire_v2.API:
            raise wire_v2.not_found()
        return session

    def get_session(self, *, authorization: str | None, session_id: str) -> Reply:
        """``GET /identification/v2/sessions/{id}``."""
        try:
            return Reply(200, self.render(self._own(authorization, session_id)))
        except Refused as refused:
            return refused.reply

    def invalidate(self, *, authorization: str | None, session_id: str) -> Reply:
        """``POST /identification/v2/sessions/{id}/invalidate``: 204, no body."""
        try:
            session = self._own(authorization, session_id)
            self.broker.end_by_client(session.request_id, session.client_id)
        except Refused as refused:
            return refused.reply
        except SessionFinished:
            message = "A session that failed cannot be invalidated."
            return wire_v2.error(400, message, "INVALID_STATUS").reply
        except UnknownSession:  # gone between the two reads
            return wire_v2.not_found().reply
        return Reply(204, None)


class EidHubSandbox:
    """The eID Hub Authentication REST API: ``/auth/rest/sessions``, its own tokens."""

    def __init__(self, broker: SandboxBroker) -> None:
        self.broker = broker

    def render(self, session: Session) -> dict[str, object]:
        url = self.broker.login_url(session.request_id)
        return wire_eidhub.render(session, url, self.broker.account_id)

    def token(self, *, authorization: str | None, content_type: str | None, body: bytes) -> Reply:
        """``POST /auth/open/connect/token``."""
        return self.broker.hub_token(
            authorization=authorization, content_type=content_type, body=body
        )

    def _client(self, authorization: str | None, query: str) -> str:
        try:
            client_id = self.broker.authorize(authorization, "signicat-api")
        except Refused as refused:
            raise wire_eidhub.from_v1_refusal(refused) from None
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_FIELDS)
        accounts = [value for name, value in pairs if name == ACCOUNT_PARAM]
        if any(account != self.broker.account_id for account in accounts):
            raise wire_eidhub.problem(
                403, "invalid_account_id", "Forbidden", "The token is not for this account."
            )
        return client_id

    def _own(self, authorization: str | None, query: str, session_id: str) -> Session:
        client_id = self._client(authorization, query)
        session = self.broker.session(session_id)
        if session is None or session.client_id != client_id or session.api != wire_eidhub.API:
            raise wire_eidhub.not_found()
        return session

    def create_session(self, *, authorization: str | None, query: str, body: bytes) -> Reply:
        """``POST /auth/rest/sessions?signicat-accountId=``: 200 with the session resource."""
        try:
            client_id = self._client(authorization, query)
            request, echo, lifetime = wire_eidhub.parse_create_request(body)
        except Refused as refused:
            return refused.reply
        session = self.broker.start(
            client_id,
            request,
            api=wire_eidhub.API,
            wire={**echo, "sessionLifetime": lifetime},
            session_id=lambda: str(uuid.uuid4()),
            # At expiry the hub deletes the session: no login, no record.
            login_lifetime=lifetime,
            lifetime=lifetime,
        )
        return Reply(200, self.render(session))

    def get_session(self, *, authorization: str | None, query: str, session_id: str) -> Reply:
        """``GET /auth/rest/sessions/{id}``."""
        try:
            return Reply(200, self.render(self._own(authorization, query, session_id)))
        except Refused as refused:
            return refused.reply

    def cancel(self, *, authorization: str | None, query: str, session_id: str) -> Reply:
        """``POST /auth/rest/sessions/{id}/cancel``: 200 with the session, ``CANCELLED``."""
        try:
            session = self._own(authorization, query, session_id)
            ended = self.broker.end_by_client(session.request_id, session.client_id)
        except Refused as refused:
            return refused.reply
        except SessionFinished:
            detail = "A session that ended in ERROR cannot be cancelled."
            return wire_eidhub.problem(400, "invalid_status", "Bad request", detail).reply
        except UnknownSession:  # gone between the two reads
            return wire_eidhub.not_found().reply
        return Reply(200, self.render(ended))
