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


NOW = day("2023-04-01T08:30:00").timestamp()
DAY = 86400.0


@pytest.mark.parametrize(
    ("text", "days", "slack_days"),
    [
        ("I mentioned an investment four weeks ago? What did I buy?", 28, 7 + 1),
        ("What kitchen appliance did I buy 10 days ago?", 10, 2.5 + 1),
        ("something I cooked a couple of days ago", 2, 1 + 1),
        ("what did we fix yesterday", 1, 1 + 1),
        ("the museum I visited two months ago", 2 * 30.44, 0.5 * 30.44 + 1),
        ("what broke last week", 7, 1.75 + 1),
    ],
)
def test_a_time_counted_back_is_a_window_around_it_a_quarter_of_the_distance_wide(
    text: str, days: float, slack_days: float
) -> None:
    ((start, end),) = dates.ago(text, NOW)
    centre = NOW - days * DAY
    assert start == pytest.approx(centre - slack_days * DAY)
    assert end == pytest.approx(centre + slack_days * DAY)


@pytest.mark.parametrize(
    "text",
    ["How many days ago did I attend a networking event?", "a while ago", "weeks ago", "ago"],
)
def test_a_question_about_the_distance_names_no_time(text: str) -> None:
    assert dates.ago(text, NOW) == []


def test_named_has_the_dates_and_with_a_now_the_times_counted_back() -> None:
    text = "what shipped on 8 May 2023, two weeks ago"
    assert dates.named(text) == dates.windows(text)
    assert dates.named(text, NOW) == dates.windows(text) + dates.ago(text, NOW)
    assert len(dates.named(text, NOW)) == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("What kitchen appliance did I buy 10 days ago?", "What kitchen appliance did I buy?"),
        ("the art event two weeks ago, where was it held", "the art event, where was it held"),
        ("something I cooked a couple of days ago", "something I cooked"),
        ("what broke last week", "what broke last week"),
        ("what did we fix yesterday", "what did we fix yesterday"),
        ("How many days ago did I meet Emma?", "How many days ago did I meet Emma?"),
        ("two weeks ago", "two weeks ago"),
    ],
)
def test_the_words_a_query_is_ranked_by_leave_out_the_times_it_counts_back(
    text: str, words: str
) -> None:
    """A distance from now is the asker's, not the record's; "last week" and "yesterday" are
    words records use too, a question about the distance names no time, and a query that is
    only a time keeps its words."""
    assert dates.without_counted_back(text) == words
