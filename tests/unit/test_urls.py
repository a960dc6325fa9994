"""Database URLs in messages: the password never shows, everything else does."""

from __future__ import annotations

import pytest

from alkstore.rules._urls import redact


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@h:5/db?sslmode=require", "postgresql://u:***@h:5/db?sslmode=require"),
        (
            "postgresql://app@db/prod?password=s3cret&sslmode=require",
            "postgresql://app@db/prod?password=***&sslmode=require",
        ),
        ("postgresql://app:s3cret@db/prod?password=s3cret", "postgresql://app:***@db/prod?password=***"),
        ("postgresql://h/db", "postgresql://h/db"),
        ("postgresql://app@db/prod", "postgresql://app@db/prod"),
        ("memory://", "memory://"),
    ],
)
def test_redact_hides_the_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_an_unparsable_url_is_not_echoed() -> None:
    assert redact("postgresql://[bad") == "<unparsable URL>"
