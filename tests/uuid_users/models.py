from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.db import models


class Member(AbstractUser):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, db_column="Member Key")

    class Meta:
        db_table = "member accounts"
