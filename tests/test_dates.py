"""The dates a query names become time windows: a day (with a day's slack either side) or a
month; a day without a year, or a date that does not exist, names none."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from engram import dates


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text",
    [
        "What movie did Tim watch on 8th December, 2023?",
        "what changed on 2023-12-08",
        "the deploy of December 8, 2023",
        "on 8 Dec 2023",
    ],
)
def test_a_named_day_is_that_day_with_a_day_either_side(text: str) -> None:
    assert dates.windows(text) == [(day("2023-12-07").timestamp(), day("2023-12-10").timestamp())]


def test_a_named_month_is_the_whole_month_and_december_ends_at_the_new_year() -> None:
    assert dates.windows("What did Joanna finish in January 2022?") == [
        (day("2022-01-01").timestamp(), day("2022-02-01").timestamp())
    ]
    assert dates.windows("in December, 2023") == [
        (day("2023-12-01").timestamp(), day("2024-01-01").timestamp())
    ]


def test_a_day_is_not_also_read_as_its_month() -> None:
    assert len(dates.windows("on 8 May 2023 and in June 2023")) == 2


@pytest.mark.parametrize(
    "text",
    ["on 4 August", "31 February 2023", "2023-13-01", "may I ask about 2023", "version 2023.1"],
)
def test_no_year_or_no_such_day_names_no_window(text: str) -> None:
    assert dates.windows(text) == []
