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


THURSDAY = day("2023-03-09T15:47:00").timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "I received a piece of jewelry last Saturday from whom?",
        "What game did I finally beat last weekend?",
        "we deploy on Fridays",
    ],
)
def test_a_day_of_the_week_or_last_weekend_is_not_read_as_a_week(text: str) -> None:
    """ "last weekend" is not "last week" (nor a stretch); days of the week name no window (on
    LongMemEval-S they cost more questions than they gained: docs/benchmarks.md, "Stretches up
    to now")."""
    assert dates.ago(text, THURSDAY) == []


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("How many times did I bake something in the past two weeks?", 14),
        ("what failed over the last 3 days", 3),
        ("How many plants did I acquire in the last month?", 30.44),
        ("the past month", 30.44),
        ("babies born in the last few months", 3 * 30.44),
        ("errors in the past day", 1),
    ],
)
def test_a_stretch_up_to_now_reaches_a_quarter_further_back_than_it_says(
    text: str, days: float
) -> None:
    """And it is one window: "the last month" is not also "last month" counted back."""
    ((start, end),) = dates.ago(text, NOW)
    slack = dates.DAY_SLACK.total_seconds()
    assert start == pytest.approx(NOW - days * 1.25 * DAY - slack)
    assert end == pytest.approx(NOW + slack)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "How many times did I bake something in the past two weeks?",
            "How many times did I bake something?",
        ),
        ("what failed over the last 3 days", "what failed"),
        ("what broke last month", "what broke last month"),
        ("What did I change last Friday?", "What did I change last Friday?"),
        ("what did I fix today", "what did I fix today"),
        ("what did we ship this week", "what did we ship this week"),
        ("in the past two weeks", "in the past two weeks"),
    ],
)
def test_the_words_a_query_is_ranked_by_leave_out_the_stretches_it_names(
    text: str, words: str
) -> None:
    """A stretch up to now is the asker's, like a time counted back; "today", "this week" and a
    day of the week stay, as "last week" does: records say them too."""
    assert dates.without_counted_back(text) == words


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("what did I do today", "2023-03-09"),
        ("the test I broke this morning", "2023-03-09"),
        ("what did we ship this week", "2023-03-06"),  # from Monday
        ("How much have I made from selling eggs this month?", "2023-03-01"),
        ("How many weddings have I attended in this year?", "2023-01-01"),
    ],
)
def test_the_present_day_week_month_or_year_runs_from_its_start_to_now(
    text: str, start: str
) -> None:
    assert dates.ago(text, THURSDAY) == [
        (
            (day(start) - dates.DAY_SLACK).timestamp(),
            THURSDAY + dates.DAY_SLACK.total_seconds(),
        )
    ]


@pytest.mark.parametrize(
    "text",
    [
        "the airlines I flew with, earliest to latest, before today",
        "anything to watch tonight?",
        "plans for this weekend",
    ],
)
def test_before_today_tonight_and_this_weekend_name_no_time_recorded(text: str) -> None:
    assert dates.ago(text, THURSDAY) == []


@pytest.mark.parametrize(
    "text",
    [
        "Which country was Jolene located in during the last week of August 2023?",
        "Where was Dave in the last two weeks of August 2023?",
    ],
)
def test_the_last_week_of_a_month_is_no_stretch_up_to_now(text: str) -> None:
    """Only the month it names is a window, and the words stay."""
    assert dates.ago(text, NOW) == []
    assert dates.without_counted_back(text) == text
    assert len(dates.named(text, NOW)) == 1
