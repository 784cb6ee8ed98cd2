"""A user model without a username: the e-mail address logs in (the adapter's other case)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.db import models


class PersonManager(BaseUserManager["Person"]):
    def create_user(self, email: str, password: str | None = None, **extra: Any) -> Person:
        user = self.model(email=self.normalize_email(email), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user


class Person(AbstractBaseUser):
    email = models.EmailField(unique=True)
    given_name = models.CharField(max_length=100, blank=True)
    is_active = models.BooleanField(default=True)

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    objects = PersonManager()
