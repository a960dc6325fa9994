"""Hypothesis profiles of the contract suite: ``ci`` (the default) and ``deep`` (``HYPOTHESIS_PROFILE=deep``).

``ci`` keeps the whole suite, on every engine in both runtimes, to a few minutes on a small machine:
a property runs once per engine and runtime, so 40 examples each are 240 a run (docs/development.md);
``deep`` is for long runs by hand. Each property scales the profile's example count by a weight
reflecting its cost (``sized``), so one knob sizes the suite. Deadlines are off: a
property that talks to a database is slow for reasons that are not bugs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

__all__ = ["MACHINE_EXAMPLES", "PROFILE", "PROFILE_NAME", "sized"]

_COMMON = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

settings.register_profile("ci", _COMMON, max_examples=40, stateful_step_count=30)
settings.register_profile(
    "deep",
    _COMMON,
    max_examples=1000,
    stateful_step_count=80,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)

#: ``HYPOTHESIS_PROFILE`` when it names a registered profile, else ``ci``.
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
#: The selected profile. Every property of the suite derives its settings from it explicitly,
#: so the suite never changes Hypothesis' global default under other test directories.
PROFILE = settings.get_profile(PROFILE_NAME)


def sized(weight: float, **overrides: object) -> settings:
    """The selected profile with its example count scaled by ``weight`` (at least 1 example)."""
    return settings(PROFILE, max_examples=max(1, round(PROFILE.max_examples * weight)), **overrides)  # type: ignore[arg-type]


#: State-machine runs per test node: Hypothesis' statistics cover ``@given`` tests only.
MACHINE_EXAMPLES: dict[str, int] = {}
