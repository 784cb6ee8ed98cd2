"""``python -m benchmarks.load_users N``: create the users bench0..bench<N-1> (load settings)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.load_settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    count = int(sys.argv[1])
    password = make_password(os.environ.get("BENCH_PASSWORD", "bench-password"))
    users = get_user_model()
    users.objects.filter(username__startswith="bench").delete()
    users.objects.bulk_create(
        [users(username=f"bench{i}", password=password) for i in range(count)]
    )


if __name__ == "__main__":
    main()
