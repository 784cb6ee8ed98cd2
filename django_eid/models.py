"""The ``Identification`` model: one row per identification session."""

from __future__ import annotations

import datetime
import json
import secrets
from collections.abc import Iterable
from typing import Any, Final

from django.conf import settings
from django.db import models
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from django_eid import crypto, person_keys, reasons
from django_eid.fields import EncryptedTextField


def new_reference() -> str:
    """The app's own per-session reference, carried in the path of every return URL."""
    return secrets.token_urlsafe(24)  # 192 random bits


def new_external_id() -> str:
    """``ExternalReference`` for the broker: 128 random bits, no personal data (it is invoiced)."""
    return secrets.token_hex(16)


def fit(field_name: str, value: str) -> str:
    """``value`` cut to what :class:`Identification`'s ``field_name`` column stores.

    Every value taken from the broker or the request goes through this, so that what is
    compared (``ONE_ACCOUNT_PER_PERSON``) is exactly what is stored.
    """
    limit = max_length(field_name)
    return value[:limit] if limit is not None else value


#: The most a JSON column of one row (``raw``, ``metadata``) stores: 64 KiB of compact UTF-8
#: JSON. A record is a few kilobytes; a broker answer up to ``MAX_RESPONSE_BYTES`` (1 MiB)
#: should not be copied into every row.
MAX_JSON_BYTES: Final = 64 * 1024


def fit_json(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` if it fits :data:`MAX_JSON_BYTES`, else a marker saying it did not.

    Never a part of it: cut JSON is no JSON, and which part to keep is a guess. The marker
    is ``{"truncated": true, "original_bytes": N, "max_bytes": MAX_JSON_BYTES}``.
    """
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size <= MAX_JSON_BYTES:
        return value
    return {"truncated": True, "original_bytes": size, "max_bytes": MAX_JSON_BYTES}


#: The encrypted columns of :class:`Identification`: deferred wherever a row is read for
#: something else, so that they are decrypted only where used (and a row under a removed key
#: still loads).
ENCRYPTED_FIELDS: Final = ("social_security_number", "evidence")


def local_today() -> datetime.date:
    """Today in the site's time zone (``USE_TZ`` on), or the server's date (off)."""
    return timezone.localdate() if settings.USE_TZ else datetime.date.today()


def born_by(age: int, today: datetime.date | None = None) -> datetime.date:
    """The latest birth date of a person who is ``age`` whole years old ``today``.

    Someone born on 29 February comes of age on 1 March in a year without one, as
    :attr:`Identification.age` counts.
    """
    today = today or local_today()
    try:
        return today.replace(year=today.year - age)
    except ValueError:  # today is 29 February, and that year has none
        return today.replace(year=today.year - age, day=28)


def check_level(min_loa: object) -> None:
    """Raise ``ValueError`` unless ``min_loa`` is ``None`` or a level of assurance
    (``"low"``, ``"substantial"``, ``"high"``): an unknown one ranks below every level, so a
    misspelt gate would otherwise let everyone through."""
    from django_eid.brokers.oidc_presets import LEVELS

    if min_loa is not None and (not isinstance(min_loa, str) or min_loa not in LEVELS):
        raise ValueError(
            f"min_loa must be a level of assurance: one of {', '.join(map(repr, LEVELS))}"
        )


def max_length(field_name: str) -> int | None:
    """The ``max_length`` of :class:`Identification`'s field ``field_name``."""
    field = Identification._meta.get_field(field_name)
    return getattr(field, "max_length", None)


class IdentificationQuerySet(models.QuerySet["Identification"]):
    """``Identification.objects``: the lookups sites and the commands need."""

    def verified(self) -> IdentificationQuerySet:
        """Rows that hold a verified identity: ``SUCCESS`` and not anonymized."""
        return self.filter(status=Identification.Status.SUCCESS, anonymized_at__isnull=True)

    def latest_verified(self, user: Any) -> Identification | None:
        """The user's latest verified identification, or ``None`` (also when anonymous).

        The national identity number is decrypted only when read: most callers never do,
        and a row under a removed key must not make the question unanswerable.
        """
        if not getattr(user, "is_authenticated", False):
            return None
        rows = self.verified().filter(user=user).defer(*ENCRYPTED_FIELDS)
        return rows.order_by("-completed_at", "-pk").first()

    def verified_for(
        self,
        user: Any,
        *,
        max_age: int | float | datetime.timedelta | None = None,
        min_age: int | None = None,
        min_loa: str | None = None,
        providers: Iterable[str] | str | None = None,
    ) -> Identification | None:
        """The user's latest verified identification if it meets every condition, else ``None``.

        ``max_age``: verified at most this long ago (seconds or a ``timedelta``).
        ``min_age``: the person is at least this many whole years old today; a person
        whose age is unknown does not qualify. ``min_loa``: verified at this level of
        assurance or a higher one (``"low"``, ``"substantial"``, ``"high"``); a verification
        whose level is not known does not qualify. ``providers``: verified with one of these.
        Only the latest verification counts: it is who the user is now. An anonymous user,
        and anonymized rows (``eid_purge --anonymize``), never qualify.
        """
        check_level(min_loa)  # also when there is nothing to judge: a typo shows at once
        latest = self.latest_verified(user)
        if latest is None or latest.unmet(
            max_age=max_age, min_age=min_age, min_loa=min_loa, providers=providers
        ):
            return None
        return latest

    def pending(self) -> IdentificationQuerySet:
        """Rows still waiting for the user to come back from the broker."""
        return self.filter(status=Identification.Status.PENDING)

    def finished(self) -> IdentificationQuerySet:
        """Rows with an outcome: every status but ``PENDING``."""
        return self.exclude(status=Identification.Status.PENDING)

    def stale(self, max_age: int) -> IdentificationQuerySet:
        """Pending rows older than ``max_age`` seconds."""
        return self.pending().filter(
            created_at__lt=timezone.now() - datetime.timedelta(seconds=max_age)
        )

    def unreadable_numbers(self, batch_size: int = 2000) -> list[int]:
        """The pks of the rows whose stored number no configured key decrypts, in order.

        Reads the ciphertexts without decrypting them into memory: only whether a key
        fits is asked. One pass over every row that holds a number.
        """
        ciphertexts = (
            self.filter(social_security_number__isnull=False)
            .annotate(ciphertext=Cast("social_security_number", models.TextField()))
            .order_by("pk")
            .values_list("pk", "ciphertext")
        )
        return [
            pk
            for pk, text in ciphertexts.iterator(batch_size)
            if text and not crypto.readable(text)
        ]

    def with_social_security_number(self, number: str) -> IdentificationQuerySet:
        """Rows holding exactly this national identity number (via the keyed hash)."""
        return self.filter(social_security_number_hash__in=crypto.lookup_hashes(number))


class Identification(models.Model):
    """An identification session of one user, and the verified identity it produced."""

    class Status(models.TextChoices):
        PENDING = "PENDING", _("Pending")
        SUCCESS = "SUCCESS", _("Identified")
        ABORTED = "ABORTED", _("Aborted")
        ERROR = "ERROR", _("Failed")
        EXPIRED = "EXPIRED", _("Expired")
        REJECTED = "REJECTED", _("Rejected")

    class Display(models.TextChoices):
        REDIRECT = "redirect", _("Redirect")
        IFRAME = "iframe", _("Iframe")

    class Channel(models.TextChoices):
        """Which front end started it, and so where its returns send the browser."""

        HTML = "html", _("HTML pages")
        API = "api", _("JSON API")

    class Purpose(models.TextChoices):
        """What the identification is for: the account's verification, or the door."""

        VERIFY = "verify", _("Verification")
        LOGIN = "login", _("Log in")
        SIGNUP = "signup", _("Sign up")

    #: ``None`` for an identification at the door (log in, sign up) until it finishes: the
    #: account linked to the person it verified, or the one created or bound for them.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="eid_identifications",
        verbose_name=_("user"),
        null=True,
        blank=True,
        # The (user, status) index serves every lookup by user: a second one would not.
        db_index=False,
    )
    purpose = models.CharField(
        _("purpose"), max_length=8, choices=Purpose.choices, default=Purpose.VERIFY
    )
    # Uniqueness as Meta constraints, not unique=True: on PostgreSQL the field option adds a
    # second, varchar_pattern_ops index for LIKE queries, which nothing here runs.
    reference = models.CharField(
        _("reference"), max_length=64, default=new_reference, editable=False
    )
    # NULL, not "", until the broker answers: the unique constraint admits many NULLs.
    request_id = models.CharField(  # noqa: DJ001
        _("broker request id"), max_length=512, null=True, blank=True
    )
    #: 128 random bits compared with the row found by ``reference``: never looked up, so it
    #: has no index.
    external_id = models.CharField(
        _("external id"), max_length=64, default=new_external_id, editable=False
    )
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    display = models.CharField(
        _("display"), max_length=16, choices=Display.choices, default=Display.REDIRECT
    )
    next_url = models.CharField(_("next URL"), max_length=2000, blank=True)
    channel = models.CharField(
        _("started through"), max_length=8, choices=Channel.choices, default=Channel.HTML
    )

    identity_provider = models.CharField(_("identity provider"), max_length=64, blank=True)
    identity_provider_unique_id = models.CharField(
        _("unique id at the provider"), max_length=255, blank=True
    )
    name = models.CharField(_("name"), max_length=255, blank=True)
    first_name = models.CharField(_("first name"), max_length=255, blank=True)
    middle_name = models.CharField(_("middle name"), max_length=255, blank=True)
    last_name = models.CharField(_("last name"), max_length=255, blank=True)
    date_of_birth = models.DateField(_("date of birth"), null=True, blank=True)
    social_security_number = EncryptedTextField(
        _("national identity number"), null=True, blank=True
    )
    # NULL, not "", marks "no number", so the hash column never matches a blank.
    social_security_number_hash = models.CharField(  # noqa: DJ001
        max_length=64, null=True, blank=True, editable=False
    )
    national_id_country = models.CharField(
        _("country of the national identity number"), max_length=2, blank=True
    )
    national_id_kind = models.CharField(
        _("kind of national identity number"), max_length=32, blank=True
    )
    same_person = models.BooleanField(
        _("must be the person verified on the account"), default=False, editable=False
    )
    #: A keyed hash of the starting browser's IP address and user agent (never the values):
    #: what completion without the browser's callback compares the broker's record with.
    device_key = models.CharField(_("starting device"), max_length=64, blank=True, editable=False)
    #: The SHA-256 of the one-time secret a JSON API start gave its front end, which
    #: ``api-return`` asks for (the token clients' equivalent of the browser's state).
    return_key = models.CharField(_("return key"), max_length=64, blank=True, editable=False)
    #: The level of assurance the broker gave the identification (``low``, ``substantial``,
    #: ``high``), when its API says one (the eID Hub); else empty.
    level_of_assurance = models.CharField(_("level of assurance"), max_length=32, blank=True)

    user_agent = models.TextField(_("user agent"), max_length=1000, blank=True)
    ip_address = models.GenericIPAddressField(_("IP address"), null=True, blank=True)

    error_status = models.CharField(_("error status"), max_length=64, blank=True)
    error_code = models.CharField(_("error code"), max_length=128, blank=True)
    error_message = models.TextField(_("error message"), max_length=2000, blank=True)

    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    raw = models.JSONField(_("record as received"), default=dict, blank=True)

    # eid_purge's cut-off and the admin's newest-first list.
    created_at = models.DateTimeField(_("created"), default=timezone.now, db_index=True)
    completed_at = models.DateTimeField(_("completed"), null=True, blank=True)
    anonymized_at = models.DateTimeField(_("anonymized"), null=True, blank=True, editable=False)
    #: ``eid_reconcile`` leaves the row alone until then: a run holds it (``claim_token``
    #: set), or it was asked recently and is due again later (``claim_token`` empty).
    claimed_until = models.DateTimeField(
        _("claimed by eid_reconcile until"), null=True, blank=True, editable=False
    )
    #: The ``eid_reconcile`` run that holds the row (random, one per run); a run changes
    #: only rows that still carry its own token, so it never undoes another run's claim.
    claim_token = models.CharField(
        _("eid_reconcile run holding the row"), max_length=32, blank=True, editable=False
    )
    #: A keyed hash of the address the identification was started from
    #: (:func:`django_eid.crypto.address_hash`): what its audit events carry of it.
    start_address_hash = models.CharField(
        _("start address (keyed hash)"), max_length=64, blank=True, editable=False
    )
    #: The OpenID provider's signed ``id_token`` and the keys it was checked with, as JSON,
    #: encrypted like the number (``KEEP_EVIDENCE``; :mod:`django_eid.evidence`). Purged and
    #: anonymized with the row's personal data.
    evidence = EncryptedTextField(_("evidence"), null=True, blank=True, editable=False)

    objects = IdentificationQuerySet.as_manager()

    #: Not stored: ``True`` once finishing this instance linked its account to the person
    #: (:func:`django_eid.flows.link.link`), so the page need not ask whether another
    #: account holds the person.
    linked_now: bool = False
    #: Not stored: ``True`` once the request holding this instance finished it at the door,
    #: the account found and checked (:func:`django_eid.door.log_in`), so the backend need
    #: not read it again.
    finished_here: bool = False

    class Meta:
        verbose_name = _("identification")
        verbose_name_plural = _("identifications")
        ordering = ("-created_at",)
        # Each index is here for a query (docs/reference/models.md, "Indexes"); the rest of
        # the app's queries narrow by one of them first.
        constraints = [
            # The start and the callbacks find their row by it.
            models.UniqueConstraint(fields=["reference"], name="django_eid_reference_unique"),
            # A RequestId seen before is refused by this index, not by a query per start.
            models.UniqueConstraint(fields=["request_id"], name="django_eid_request_id_unique"),
        ]
        indexes = [
            # A user's rows: verified_for, the pending limit, the start page's rows, the
            # user's deletion (user_id alone is this index's prefix).
            models.Index(fields=["user", "status"], name="django_eid_user_status"),
            # One account per person: another account's verified row of the same person, by
            # the provider's unique id or by the number's lookup hash. Only verified rows,
            # and only rows with a number, are in them.
            models.Index(
                fields=["identity_provider_unique_id"],
                name="django_eid_verified_uid",
                condition=models.Q(status="SUCCESS"),
            ),
            models.Index(
                fields=["social_security_number_hash"],
                name="django_eid_number_hash",
                condition=models.Q(social_security_number_hash__isnull=False),
            ),
            # eid_reconcile's claim: the pending rows, oldest first, that no run holds. Only
            # pending rows are in it, so it stays small however long the history grows.
            # PostgreSQL and SQLite build it; other databases skip partial indexes.
            models.Index(
                fields=["created_at", "claimed_until"],
                name="django_eid_pending_due",
                condition=models.Q(status="PENDING"),
            ),
            # The admin's provider filter: a provider's rows newest first, and their capped
            # count, without reading the table (a provider with few rows or none would
            # otherwise walk all of it). The status filter reads (user, status) instead.
            models.Index(
                fields=["identity_provider", "created_at"], name="django_eid_provider_created"
            ),
        ]

    def __str__(self) -> str:
        return f"Identification {self.pk} ({self.status})"

    def __repr__(self) -> str:
        return f"<Identification pk={self.pk} user_id={self.user_id} status={self.status}>"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Keep the lookup hash in step with the encrypted number whatever path saves it. A
        # number not loaded (deferred) is not saved either; one no configured key decrypts
        # is written back unchanged, and so is its hash, computed when it could be.
        if "social_security_number" not in self.get_deferred_fields():
            number = self.social_security_number
            if not isinstance(number, crypto.Unreadable):
                self.social_security_number_hash = crypto.lookup_hash(number) if number else None
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "social_security_number" in update_fields:
            kwargs["update_fields"] = {*update_fields, "social_security_number_hash"}
        super().save(*args, **kwargs)

    @property
    def is_verified(self) -> bool:
        """Holds a verified identity: ``SUCCESS`` and not anonymized."""
        return self.status == self.Status.SUCCESS and self.anonymized_at is None

    @property
    def is_finished(self) -> bool:
        return self.status != self.Status.PENDING

    @property
    def at_the_door(self) -> bool:
        """Started by a visitor who was not logged in: to log in or to sign up."""
        return self.purpose != self.Purpose.VERIFY

    @property
    def age(self) -> int | None:
        """Age in whole years today, or ``None`` without a date of birth."""
        born = self.date_of_birth
        if born is None:
            return None
        today = local_today()
        return today.year - born.year - ((today.month, today.day) < (born.month, born.day))

    def unmet(
        self,
        *,
        max_age: int | float | datetime.timedelta | None = None,
        min_age: int | None = None,
        min_loa: str | None = None,
        providers: Iterable[str] | str | None = None,
    ) -> tuple[str, ...]:
        """The conditions of a gate this identification fails, as gate-reason codes.

        ``too_old`` (verified longer ago than ``max_age``), ``wrong_provider``
        (``providers``), ``loa_too_low`` (a level of assurance below ``min_loa``, or none
        stated), ``too_young`` or ``age_not_known`` (``min_age``); empty when it meets them
        all. It does not look at the status: see :meth:`is_verified`. A ``min_loa`` that is
        not a level raises ``ValueError``: a misspelt level must not let everyone through.
        """
        from django_eid.brokers.oidc_presets import level_rank

        check_level(min_loa)
        failed = []
        if max_age is not None:
            if not isinstance(max_age, datetime.timedelta):
                max_age = datetime.timedelta(seconds=max_age)
            if self.completed_at is None or timezone.now() - self.completed_at > max_age:
                failed.append(reasons.TOO_OLD)
        if providers is not None:
            wanted = (providers,) if isinstance(providers, str) else tuple(providers)
            if self.identity_provider not in wanted:
                failed.append(reasons.WRONG_PROVIDER)
        # A level the broker did not state (or one django-eid does not know) is too low.
        if min_loa is not None and level_rank(self.level_of_assurance) < level_rank(min_loa):
            failed.append(reasons.LEVEL_TOO_LOW)
        if min_age is not None:
            age = self.age
            if age is None:
                failed.append(reasons.AGE_NOT_KNOWN)
            elif age < min_age:
                failed.append(reasons.TOO_YOUNG)
        return tuple(failed)

    @property
    def has_unreadable_number(self) -> bool:
        """A number is stored, but no configured key decrypts it (a key was removed too
        early): it reads as :class:`~django_eid.crypto.Unreadable` until the key is back."""
        return isinstance(self.social_security_number, crypto.Unreadable)

    @property
    def masked_social_security_number(self) -> str:
        """The national identity number with all but the digits of the date of birth hidden
        (:func:`django_eid.national_id.mask`): ``310185•••••``; ``""`` when there is none,
        or when it cannot be decrypted (:attr:`has_unreadable_number`)."""
        from django_eid import national_id

        number = self.social_security_number or ""
        return national_id.mask(number, self.national_id_country) if number else ""


class PersonClaim(models.Model):
    """One account's hold on one key of a verified person, for ``ONE_ACCOUNT_PER_PERSON``.

    A person has up to two keys: their provider and unique id there (``uid:``), and their
    national identity number's lookup hash under the current key (``ssn:``). ``key`` is
    unique, so two accounts cannot hold the same person at once: the SUCCESS transition
    writes its claims in the same transaction, and the second of two racing transitions
    waits for the first and then finds it. A claim lives exactly as long as its
    identification holds the identity as ``SUCCESS``: it goes with a receiver's rejection,
    ``eid_purge`` (deleted or anonymized rows) and the user's deletion.
    """

    UID = person_keys.UID
    SSN = person_keys.SSN

    key = models.CharField(_("person key"), max_length=68, editable=False)
    identification = models.ForeignKey(
        Identification,
        on_delete=models.CASCADE,
        related_name="person_claims",
        verbose_name=_("identification"),
        editable=False,
    )

    class Meta:
        verbose_name = _("person claim")
        verbose_name_plural = _("person claims")
        # A constraint rather than unique=True: no LIKE twin on PostgreSQL (see Identification).
        constraints = [models.UniqueConstraint(fields=["key"], name="django_eid_claim_key_unique")]

    def __str__(self) -> str:
        return f"{self.key[:12]}… of identification {self.identification_id}"

    def __repr__(self) -> str:
        return f"<PersonClaim pk={self.pk} identification_id={self.identification_id}>"

    @classmethod
    def keys_for(cls, identification: Identification) -> list[str]:
        """The keys of the person ``identification`` stores (see :mod:`django_eid.person_keys`)."""
        return person_keys.keys(identification)


class LinkedIdentity(models.Model):
    """An account's lasting link to a person at an eID scheme: who may log in as it.

    ``key`` is the person's ``uid:`` key (:func:`django_eid.person_keys.uid_key`): the
    SHA-256 of the eID scheme and the person's unique id there, the same key a
    :class:`PersonClaim` holds. Unlike a claim, a link does not hang on an identification:
    it outlives ``eid_purge`` (deleted and anonymized rows), and, the key depending on no
    encryption key and no ``SECRET_KEY``, every key rotation and ``eid_reencrypt``; it goes
    with the user. ``key`` is unique: one person at one eID scheme links one account, whatever
    ``ONE_ACCOUNT_PER_PERSON`` says.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="eid_links",
        verbose_name=_("user"),
    )
    key = models.CharField(_("person key"), max_length=68, editable=False)
    #: The eID scheme (``no-bankid``), whichever broker API or provider name reported it.
    scheme = models.CharField(_("eID scheme"), max_length=64, editable=False)
    #: The provider name of the identification that made the link (``NO_BANKID_WEB``).
    provider = models.CharField(_("identity provider"), max_length=64, editable=False)
    linked_at = models.DateTimeField(_("linked at"), default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("linked identity")
        verbose_name_plural = _("linked identities")
        ordering = ("linked_at", "pk")
        # A constraint rather than unique=True: no LIKE twin on PostgreSQL (see Identification).
        constraints = [models.UniqueConstraint(fields=["key"], name="django_eid_link_key_unique")]

    def __str__(self) -> str:
        return f"{self.provider or self.scheme} link of user {self.user_id}"

    def __repr__(self) -> str:
        return f"<LinkedIdentity pk={self.pk} user_id={self.user_id} scheme={self.scheme!r}>"


class StartCounter(models.Model):
    """How many identifications were started at the door in one window, per browser session
    or per client address: the anonymous caps (``LOGIN_MAX_PENDING_PER_SESSION``,
    ``LOGIN_RATE``; :mod:`django_eid.flows.caps`).

    ``key`` is a keyed hash (``SECRET_KEY``) of the session key or of the address (its /64
    for IPv6), never the value. A row is counted up by one statement per start, which on
    PostgreSQL holds the row's lock until it commits, so parallel starts count one after
    the other. ``eid_purge`` removes the rows whose window is over.
    """

    key = models.CharField(_("counter key"), max_length=68, primary_key=True, editable=False)
    window_start = models.DateTimeField(_("window start"), editable=False)
    count = models.PositiveIntegerField(_("starts"), default=0, editable=False)

    class Meta:
        verbose_name = _("start counter")
        verbose_name_plural = _("start counters")

    def __str__(self) -> str:
        return f"{self.key[:12]}…: {self.count} since {self.window_start:%Y-%m-%d %H:%M}"


class AuditEvent(models.Model):
    """One change of an identification, kept after its personal data is gone: the audit
    trail (:mod:`django_eid.audit`).

    Append-only: written in the transaction of the change it describes, never updated;
    deleted only by ``eid_purge --events-older-than``. No foreign key: an event outlives
    its identification (``eid_purge``) and its user (the account's deletion), so both are
    kept as the numbers they were. It holds no name, date of birth, national identity number
    or broker text: ids, codes, the provider and level, and a keyed hash of the start's
    address.
    """

    class Kind(models.TextChoices):
        STARTED = "started", _("Started")
        #: Finished through the browser's return.
        RETURNED = "returned", _("Returned")
        #: Finished otherwise: the broker's callback, a poll, the API.
        FINISHED = "finished", _("Finished")
        #: Finished by ``eid_reconcile``.
        RECONCILED = "reconciled", _("Reconciled")
        EXPIRED = "expired", _("Expired")
        CANCELLED = "cancelled", _("Cancelled")
        #: A success turned down afterwards: by a site rule or a signal receiver.
        REJECTED = "rejected", _("Rejected")
        #: A call to the broker for it failed (the row may be unchanged).
        BROKER_ERROR = "broker_error", _("Broker error")
        PURGED = "purged", _("Purged")
        ANONYMIZED = "anonymized", _("Anonymized")
        LINKED = "linked", _("Linked")
        BOUND = "bound", _("Bound")

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(_("at"), default=timezone.now, editable=False)
    kind = models.CharField(_("event"), max_length=16, choices=Kind.choices, editable=False)
    identification_id = models.BigIntegerField(_("identification"), null=True, editable=False)
    #: The user's primary key as text (an integer or a UUID), "" for none.
    user_id = models.CharField(_("user"), max_length=64, blank=True, editable=False)
    purpose = models.CharField(_("purpose"), max_length=8, blank=True, editable=False)
    broker_api = models.CharField(_("broker API"), max_length=16, blank=True, editable=False)
    provider = models.CharField(_("identity provider"), max_length=64, blank=True, editable=False)
    level_of_assurance = models.CharField(
        _("level of assurance"), max_length=32, blank=True, editable=False
    )
    #: The identification's status after the change.
    status = models.CharField(_("status"), max_length=16, blank=True, editable=False)
    #: django-eid's outcome or reason code, or the broker's error code: a code, never text.
    outcome = models.CharField(_("outcome"), max_length=128, blank=True, editable=False)
    display = models.CharField(_("display"), max_length=16, blank=True, editable=False)
    address_hash = models.CharField(
        _("start address (keyed hash)"), max_length=64, blank=True, editable=False
    )
    #: From the start to this change, for the changes that finish it.
    duration_ms = models.PositiveIntegerField(_("duration (ms)"), null=True, editable=False)

    class Meta:
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        ordering = ("-at", "-id")
        indexes = [
            # The export's --since/--until, the admin's list, the dashboard's windows and
            # eid_purge --events-older-than.
            models.Index(fields=["at"], name="django_eid_event_at"),
            # An account's trail (eid_audit --user, the admin's search).
            models.Index(fields=["user_id", "at"], name="django_eid_event_user"),
            # An identification's trail.
            models.Index(fields=["identification_id"], name="django_eid_event_ident"),
            # The admin's filter by kind, newest first, and its capped count.
            models.Index(fields=["kind", "at"], name="django_eid_event_kind"),
            # The dashboard's sessions per month (django_eid.dashboard): the sessions the
            # broker created, counted by an index-only scan of 12 months instead of a read of
            # every event of those months (docs/benchmarks.md, "The audit trail").
            models.Index(
                fields=["at"],
                name="django_eid_event_session",
                condition=models.Q(kind="started", status="PENDING"),
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.kind} of identification {self.identification_id} at {self.at:%Y-%m-%d %H:%M:%S}"
        )
