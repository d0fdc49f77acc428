"""How many examples a property test runs, by the Hypothesis profile of the run.

``tests/conftest.py`` registers two profiles: ``gregor`` (the whole run, ``scripts/test.sh``)
keeps every test's own count, and ``gregor-fast`` (``scripts/test.sh --fast``, the loop one
runs while working) a fifth of it, at least 3 (Hypothesis tries its simplest examples first, so
one or two would hardly search). A test that sets ``max_examples`` asks here:

    @settings(max_examples=examples(600), deadline=None)

The count is read when the test module is imported, after the run's profile is loaded
(``pytest_configure``). Tests that set no count get the profile's (100, or 20 in the fast run).
"""

from __future__ import annotations

from hypothesis import settings

__all__ = ["FAST_PROFILE", "examples"]

FAST_PROFILE = "gregor-fast"


def examples(full: int) -> int:
    """``full`` in the whole run; a fifth of it (at least 3, at most ``full``) in the fast run."""
    if settings.get_current_profile_name() != FAST_PROFILE:
        return full
    return min(full, max(3, full // 5))
