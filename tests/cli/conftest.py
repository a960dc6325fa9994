"""The command line's tests never see an ``ALKSTORE_URL`` of the environment they run in."""

from __future__ import annotations

import pytest

from alkstore.adapters.cli import URL_VARIABLE


@pytest.fixture(autouse=True)
def _no_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)
