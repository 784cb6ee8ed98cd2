"""The access token is shared through the Django cache: one token request per lifetime."""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import pytest
import responses
from django.core.cache import caches

import django_eid.tokens
from django_eid.client import EidClient
from django_eid.exceptions import EidApiError, EidUnavailable, InvalidScope
from django_eid.tokens import AccessToken, cache_key
from tests.fixtures_client import (
    RECORD,
    REQUEST_ID,
    SECRET,
    SESSION_URL,
    TOKEN_URL,
    SettingsWrapper,
    add_token,
    api_calls,
    eid_settings_with,
    token_calls,
)


class Clock:
    """A fake clock for django_eid.tokens: time passes only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(django_eid.tokens, "time", fake)
    return fake


def add_record(rsps: responses.RequestsMock, status: int = 200, json: Any = RECORD) -> None:
    rsps.add(responses.GET, SESSION_URL, json=json, status=status)


def bearer(call: Any) -> str:
    return str(call.request.headers["Authorization"])


def test_two_clients_sharing_a_cache_make_one_token_request(
    wire: responses.RequestsMock,
) -> None:
    add_token(wire, "tok-shared")
    add_record(wire)
    first, second = EidClient(), EidClient()
    first.get_session(REQUEST_ID)
    second.get_session(REQUEST_ID)
    second.get_session(REQUEST_ID)
    assert len(token_calls(wire)) == 1
    assert [bearer(c) for c in api_calls(wire)] == ["Bearer tok-shared"] * 3
    assert first.get_token().access_token == second.get_token().access_token == "tok-shared"


def test_the_token_lives_in_the_configured_cache(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    loc = "django.core.cache.backends.locmem.LocMemCache"
    settings.CACHES = {
        "default": {"BACKEND": loc, "LOCATION": "default"},
        "tokens": {"BACKEND": loc, "LOCATION": "tokens"},
    }
    settings.DJANGO_EID = eid_settings_with(TOKEN_CACHE="tokens")
    add_token(wire)
    client = EidClient()
    client.get_token()
    assert caches["tokens"].get(client.tokens.key)["access_token"] == "tok-1"
    assert caches["default"].get(client.tokens.key) is None


def test_the_secret_is_neither_in_the_key_nor_in_the_cache(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    add_token(wire)
    client = EidClient()
    client.get_token()
    key = client.tokens.key
    assert SECRET not in key
    assert key.startswith("django_eid:token:")
    stored = caches["default"].get(key)
    assert SECRET not in repr(stored)
    assert SECRET.encode() not in pickle.dumps(stored)
    # The key follows the client id, scopes and URLs, not the secret.
    settings.DJANGO_EID = eid_settings_with(CLIENT_SECRET="rotated-secret")
    assert EidClient().tokens.key == key
    for change in (
        {"CLIENT_ID": "other"},
        {"SCOPES": ["identify", "event"]},
        {"BASE_URL": "https://other.broker.test"},
        {"AUTH_URL": "https://other-auth.broker.test"},
    ):
        settings.DJANGO_EID = eid_settings_with(**change)
        assert EidClient().tokens.key != key


def test_cache_key_is_a_digest() -> None:
    key = cache_key("https://auth", "https://api", "client", "identify", "basic")
    assert len(key) == len("django_eid:token:") + 40
    assert "client" not in key


def test_an_expired_token_is_replaced(wire: responses.RequestsMock, clock: Clock) -> None:
    add_token(wire, "tok-1", expires_in=3600)
    add_token(wire, "tok-2", expires_in=3600)
    client, other = EidClient(), EidClient()
    assert client.get_token().access_token == "tok-1"
    clock.now += 3600 - 60 - 1  # just inside the safety margin
    assert client.get_token().access_token == "tok-1"
    assert other.get_token().access_token == "tok-1"
    assert len(token_calls(wire)) == 1
    clock.now += 2
    assert client.get_token().access_token == "tok-2"
    assert other.get_token().access_token == "tok-2"
    assert len(token_calls(wire)) == 2


@pytest.mark.parametrize(
    ("expires_in", "usable_for"),
    [(3600, 3540), (600, 540), (599, 539.1), (300, 270), (10, 9), (1, 0.9)],
)
def test_safety_margin_is_60s_or_a_tenth_of_the_lifetime(
    clock: Clock, expires_in: int, usable_for: float
) -> None:
    token = AccessToken.issued_now("t", "Bearer", expires_in)
    assert token.use_until == pytest.approx(clock.now + usable_for)
    clock.now += usable_for - 0.01
    assert token.fresh
    clock.now += 0.02
    assert not token.fresh


def test_a_token_with_a_tiny_lifetime_is_renewed(
    wire: responses.RequestsMock, clock: Clock
) -> None:
    add_token(wire, "tok-1", expires_in=1)
    add_token(wire, "tok-2", expires_in=3600)
    client = EidClient()
    assert client.get_token().access_token == "tok-1"
    clock.now += 0.85  # within the 0.9 s it may be used
    assert client.get_token().access_token == "tok-1"
    clock.now += 0.1
    assert client.get_token().access_token == "tok-2"
    assert len(token_calls(wire)) == 2


def test_the_token_repr_hides_the_token() -> None:
    token = AccessToken.issued_now("eyJhbGciOi.secret-part.sig", "Bearer", 3600)
    assert "eyJ" not in repr(token)
    assert "3600" in repr(token)


def test_a_stale_lock_does_not_block(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(TIMEOUT=0.2)
    add_token(wire)
    client = EidClient()
    # A worker that took the lock and died: the lock stays for a long time.
    caches["default"].set(client.tokens.lock_key, "1", 3600)
    started = time.monotonic()
    # The call waits for the holder's outcome within its own TIMEOUT, no longer.
    with pytest.raises(EidUnavailable, match="another worker's token request"):
        client.get_token()
    elapsed = time.monotonic() - started
    assert 0.2 - 2 * django_eid.tokens.POLL_INTERVAL <= elapsed < 0.2 + 0.5
    assert token_calls(wire) == []
    # Once the lock is gone (its TTL is TIMEOUT + 1 s), the next call fetches the token.
    caches["default"].delete(client.tokens.lock_key)
    assert client.get_token().access_token == "tok-1"
    assert len(token_calls(wire)) == 1


def test_a_waiter_takes_the_token_stored_by_the_lock_holder(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(TIMEOUT=5)
    client, holder = EidClient(), EidClient()
    caches["default"].set(client.tokens.lock_key, "1", 60)

    def finish() -> None:
        holder.tokens._store(AccessToken.issued_now("tok-holder", "Bearer", 3600))
        caches["default"].delete(client.tokens.lock_key)

    timer = threading.Timer(0.1, finish)
    timer.start()
    try:
        assert client.get_token().access_token == "tok-holder"
    finally:
        timer.join()
    assert token_calls(wire) == []


def test_concurrent_threads_make_one_token_request(
    wire: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clients = [EidClient() for _ in range(8)]  # one per thread, as get_client() does
    requests_seen: list[int] = []
    # The token is answered once every other thread found the shared lock taken: they all
    # arrive while this one fetches (rather than after a pause long enough, most times).
    refused: set[int] = set()
    all_refused = threading.Event()
    locked_fetch = django_eid.tokens.TokenStore._locked_fetch

    def counted(store: django_eid.tokens.TokenStore, lock_ttl: int) -> AccessToken | None:
        token = locked_fetch(store, lock_ttl)
        if token is None:
            refused.add(threading.get_ident())
            if len(refused) == len(clients) - 1:
                all_refused.set()
        return token

    monkeypatch.setattr(django_eid.tokens.TokenStore, "_locked_fetch", counted)

    def slow_token(request: Any) -> tuple[int, dict[str, str], str]:
        requests_seen.append(1)
        assert all_refused.wait(10)
        body = '{"access_token": "tok-once", "expires_in": 3600, "token_type": "Bearer"}'
        return 200, {"Content-Type": "application/json"}, body

    wire.add_callback(responses.POST, TOKEN_URL, callback=slow_token)
    barrier = threading.Barrier(len(clients))
    results: list[str] = []
    errors: list[BaseException] = []

    def work(client: EidClient) -> None:
        try:
            barrier.wait()
            results.append(client.get_token().access_token)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert results == ["tok-once"] * len(clients)
    assert len(requests_seen) == 1


def test_a_failed_fetch_releases_the_lock(wire: responses.RequestsMock) -> None:
    wire.add(responses.POST, TOKEN_URL, json={"error": "invalid_scope"}, status=400)
    client = EidClient()
    with pytest.raises(InvalidScope):
        client.get_token()
    assert caches["default"].get(client.tokens.lock_key) is None
    assert caches["default"].get(client.tokens.key) is None


@pytest.mark.parametrize(
    "junk",
    [
        "tok-1",
        {"access_token": "tok-old"},
        {"access_token": "x", "token_type": "Bearer", "expires_in": 1, "use_until": "later"},
        {"access_token": "x", "token_type": "Bearer", "expires_in": 1, "use_until": None},
    ],
)
def test_junk_in_the_cache_is_ignored(wire: responses.RequestsMock, junk: Any) -> None:
    add_token(wire, "tok-new")
    client = EidClient()
    caches["default"].set(client.tokens.key, junk)
    assert client.get_token().access_token == "tok-new"


# -- 401: the token was revoked or expired early --------------------------------------


def test_401_drops_the_token_and_repeats_the_call_once(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1")
    add_token(wire, "tok-2")
    add_record(wire, status=401, json={"message": "token expired"})
    add_record(wire)
    client, other = EidClient(), EidClient()
    record = client.get_session(REQUEST_ID)
    assert record.request_id == REQUEST_ID
    assert [bearer(c) for c in api_calls(wire)] == ["Bearer tok-1", "Bearer tok-2"]
    assert len(token_calls(wire)) == 2
    # The new token was shared, the old one is gone.
    assert other.get_token().access_token == "tok-2"
    assert caches["default"].get(client.tokens.key)["access_token"] == "tok-2"


def test_401_on_create_also_renews_once(wire: responses.RequestsMock) -> None:
    from django_eid.brokers import ReturnUrls

    add_token(wire, "tok-1")
    add_token(wire, "tok-2")
    wire.add(responses.POST, SESSION_URL, status=401)
    wire.add(responses.POST, SESSION_URL, json={"Url": "https://id.test/x", "RequestId": "r"})
    urls = ReturnUrls("https://s.test/ok", "https://s.test/abort", "https://s.test/err")
    created = EidClient().create_session(return_urls=urls, external_reference="ref")
    assert created.request_id == "r"
    assert [bearer(c) for c in api_calls(wire)] == ["Bearer tok-1", "Bearer tok-2"]


def test_a_second_401_is_an_api_error(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1")
    add_token(wire, "tok-2")
    add_token(wire, "tok-3")
    add_record(wire, status=401, json={"message": "unauthorized tok-2"})
    client = EidClient()
    with pytest.raises(EidApiError) as info:
        client.get_session(REQUEST_ID)
    assert info.value.status_code == 401
    assert len(api_calls(wire)) == 2
    assert len(token_calls(wire)) == 2
    assert "tok-1" not in str(info.value)
    assert "tok-2" not in str(info.value)


def test_invalidate_keeps_a_newer_token(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1")
    client, other = EidClient(), EidClient()
    old = client.get_token()
    # Another worker already replaced the token.
    other.tokens._store(AccessToken.issued_now("tok-newer", "Bearer", 3600))
    client.tokens.invalidate(old)
    assert client.get_token().access_token == "tok-newer"
    assert len(token_calls(wire)) == 1


class _BrokenCache:
    """A cache backend whose server is down: every call raises its own error."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("cache server unreachable")

        return fail


def test_a_token_cache_outage_falls_back_to_fetching(
    wire: responses.RequestsMock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_token(wire)
    add_record(wire)
    client = EidClient()
    monkeypatch.setattr(type(client.tokens), "cache", property(lambda self: _BrokenCache()))
    record = client.get_session(REQUEST_ID)
    assert record.status == "SUCCESS"
    assert len(token_calls(wire)) == 1
    assert "token cache failed" in caplog.text
    assert SECRET not in caplog.text
    # A 401 with the cache still down renews without raising the cache's error either.
    wire.replace(responses.GET, SESSION_URL, status=401)
    add_token(wire, token="tok-2")
    with pytest.raises(EidApiError):
        client.get_session(REQUEST_ID)


def test_a_slow_fetch_does_not_release_a_lock_taken_over_by_another_worker() -> None:
    store_cache = caches["default"]
    holder: list[django_eid.tokens.TokenStore] = []

    def slow_fetch() -> AccessToken:
        # Our lock expired during a slow fetch and another worker took it.
        store_cache.set(holder[0].lock_key, "another-worker", 30)
        return AccessToken.issued_now("tok-slow", "Bearer", 3600)

    store = django_eid.tokens.TokenStore("default", cache_key("slow-test"), slow_fetch, wait=0.2)
    holder.append(store)
    assert store.get().access_token == "tok-slow"
    assert store_cache.get(store.lock_key) == "another-worker"


def test_a_cache_failing_at_the_unlock_keeps_the_fetched_token(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fetches: list[str] = []

    def fetch() -> AccessToken:
        fetches.append("fetch")
        return AccessToken.issued_now("tok-fetched", "Bearer", 3600)

    tokens = django_eid.tokens.TokenStore("default", cache_key("unlock-test"), fetch, wait=0.2)
    delete = tokens.cache.delete

    def delete_failing_for_the_lock(key: str) -> None:
        if key == tokens.lock_key:  # the cache server went away during the fetch
            raise ConnectionError("cache server unreachable")
        delete(key)

    monkeypatch.setattr(tokens.cache, "delete", delete_failing_for_the_lock)
    assert tokens.get().access_token == "tok-fetched"
    assert fetches == ["fetch"]  # the failing unlock did not pass for a cache outage
    assert "releasing the lock" in caplog.text
