"""Schedule triggers (``agentchain.aiagents.rules.schedules``): pure, with "now" injected.

Aspects covered:
* parsing: 5 fields, 6 with seconds first, macros; refused with a sentence: a field
  out of range, a date that never comes, @reboot, too many fields, an unknown zone;
  the CRD's pattern already refuses a wrong field count (the model does too);
* the due tick, as a table: exactly at a tick, within the starting deadline, past it,
  before the AiAgent existed, seconds-first expressions, a custom deadline;
* missed ticks, as CronJob: after any outage at most ONE run catches up, the latest
  missed tick, and only within the deadline (hypothesis over outages);
* exactly once: every "now" between a tick and its deadline names the same run (same
  seed), and the next tick another (hypothesis);
* time zones: a Paris schedule fires at Paris time in winter and in summer; the seed is
  the instant in UTC; on the days clocks change, a time in the skipped hour runs at the
  first instant after it, one in the repeated hour runs once (an hourly schedule has one
  run fewer that day), as docs/schedules.md says;
* runs: disabled agents and unparseable schedules want none; other triggers are
  ignored; the event carries the tick and the schedule and no GitHub field; the
  ``Scheduled`` condition says valid or why not; ``trigger_step`` follows the trigger
  whose schedule the event names.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agentchain.aiagents.rules import schedules
from agentchain.core.rules.outcomes import trigger_step
from agentchain.models.aiagent import AiAgentSpec, TriggerSchedule
from agentchain.models.conditions import Reason

UTC = dt.UTC


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def sched(cron: str, zone: str = "UTC", deadline: int | None = None) -> TriggerSchedule:
    return TriggerSchedule(cron=cron, time_zone=zone, starting_deadline_seconds=deadline)


VALID = ["0 3 * * *", "*/5 * * * *", "*/10 * * * * *", "@daily", "@hourly", " 0  3 * * 1-5 "]


@pytest.mark.parametrize("cron", VALID)
def test_valid_expressions_parse(cron: str) -> None:
    schedules.parse(sched(cron))


# fmt: off
INVALID = [
    ("out-of-range", sched("61 * * * *"), "out of range"),
    ("never", sched("0 0 30 2 *"), "failed to find"),
    ("reboot", sched("@reboot"), "cron macro @reboot is not one of"),
    ("unknown-macro", sched("@sometimes"), "cron macro @sometimes"),
    ("zone", sched("0 * * * *", "Mars/Olympus"), "time zone 'Mars/Olympus' is not an IANA zone"),
]
# fmt: on


@pytest.mark.parametrize(("schedule", "why"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_schedules_say_why(schedule: TriggerSchedule, why: str) -> None:
    with pytest.raises(schedules.ScheduleError, match=why):
        schedules.parse(schedule)


@pytest.mark.parametrize("cron", ["* * * *", "* * * * * * *", "", "daily"])
def test_the_schema_refuses_a_wrong_field_count(cron: str) -> None:
    with pytest.raises(ValidationError):
        sched(cron)


NIGHTLY = schedules.parse(sched("0 3 * * *"))
# fmt: off
DUE = [
    ("exactly-at-tick", NIGHTLY, at(2026, 1, 5, 3, 0), None, at(2026, 1, 5, 3, 0)),
    ("within-deadline", NIGHTLY, at(2026, 1, 5, 3, 4, 59), None, at(2026, 1, 5, 3, 0)),
    ("at-deadline", NIGHTLY, at(2026, 1, 5, 3, 5), None, at(2026, 1, 5, 3, 0)),
    ("past-deadline", NIGHTLY, at(2026, 1, 5, 3, 5, 1), None, None),
    ("before-tick", NIGHTLY, at(2026, 1, 5, 2, 59, 59), None, None),
    ("before-creation", NIGHTLY, at(2026, 1, 5, 3, 1), at(2026, 1, 5, 3, 0, 30), None),
    ("after-creation", NIGHTLY, at(2026, 1, 5, 3, 1), at(2026, 1, 5, 2, 0), at(2026, 1, 5, 3, 0)),
    ("custom-deadline", schedules.parse(sched("0 3 * * *", deadline=7200)),
     at(2026, 1, 5, 4, 59), None, at(2026, 1, 5, 3, 0)),
    ("seconds-first", schedules.parse(sched("*/10 * * * * *")),
     at(2026, 1, 5, 3, 0, 27), None, at(2026, 1, 5, 3, 0, 20)),
]
# fmt: on


@pytest.mark.parametrize(
    ("parsed", "now", "created", "expected"), [c[1:] for c in DUE], ids=[c[0] for c in DUE]
)
def test_due(
    parsed: schedules.Parsed, now: dt.datetime, created: dt.datetime | None, expected: Any
) -> None:
    assert schedules.due(parsed, now, created) == expected


EVERY_MINUTE = sched("* * * * *", deadline=90)
START = at(2026, 3, 1)


@given(
    outage_start=st.integers(min_value=0, max_value=10_000),
    outage=st.integers(min_value=1, max_value=20_000),
)
def test_after_an_outage_at_most_the_latest_missed_tick_runs(
    outage_start: int, outage: int
) -> None:
    """The leader looks every 5 s except during the outage: of the ticks the outage
    hid, at most one ever runs (the latest), and only within the deadline."""
    parsed = schedules.parse(EVERY_MINUTE)
    down_from = START + dt.timedelta(seconds=outage_start)
    back_at = down_from + dt.timedelta(seconds=outage)
    before = {
        schedules.due(parsed, down_from - dt.timedelta(seconds=s), None) for s in range(0, 95, 5)
    }
    after = {
        schedules.due(parsed, back_at + dt.timedelta(seconds=s), None) for s in range(0, 600, 5)
    }
    missed = {t for t in _minutes(down_from, back_at) if t not in before}
    caught_up = missed & after
    assert len(caught_up) <= 1
    if caught_up:
        (tick,) = caught_up
        assert tick == max(missed)
        assert back_at - tick <= dt.timedelta(seconds=90)
    elif missed and back_at - max(missed) <= dt.timedelta(seconds=90):
        pytest.fail("the latest missed tick, still within its deadline, did not run")


def _minutes(start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """Every whole minute in (start, end]."""
    t = start.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    if start.second == 0 and start.microsecond == 0:
        t = start + dt.timedelta(minutes=1)
    out = []
    while t <= end:
        out.append(t)
        t += dt.timedelta(minutes=1)
    return out


@given(offset=st.floats(min_value=0, max_value=90, allow_nan=False))
def test_every_look_within_the_deadline_names_the_same_run(offset: float) -> None:
    parsed = schedules.parse(EVERY_MINUTE)
    tick = at(2026, 3, 1, 12, 0)
    found = schedules.due(parsed, tick + dt.timedelta(seconds=offset), None)
    assert found is not None
    seed = schedules.tick_seed("ns", "ai-x", EVERY_MINUTE, found)
    if offset < 60:
        assert seed == schedules.tick_seed("ns", "ai-x", EVERY_MINUTE, tick)
    else:  # The next minute's tick is a run of its own.
        assert seed != schedules.tick_seed("ns", "ai-x", EVERY_MINUTE, tick)


def test_a_paris_schedule_fires_at_paris_time_winter_and_summer() -> None:
    parsed = schedules.parse(sched("0 3 * * *", "Europe/Paris"))
    assert schedules.due(parsed, at(2026, 1, 15, 2, 0), None) == at(2026, 1, 15, 2, 0)  # CET
    assert schedules.due(parsed, at(2026, 7, 15, 1, 0), None) == at(2026, 7, 15, 1, 0)  # CEST
    assert schedules.due(parsed, at(2026, 7, 15, 2, 0), None) is None


def test_the_seed_is_the_instant_in_utc() -> None:
    schedule = sched("0 3 * * *", "Europe/Paris")
    tick = dt.datetime(2026, 1, 15, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    seed = schedules.tick_seed("ns", "ai-x", schedule, tick)
    assert seed == "schedule/ns/ai-x/0 3 * * * in Europe/Paris/2026-01-15T02:00:00Z"


def spec(*triggers: dict[str, Any], enabled: bool = True) -> AiAgentSpec:
    return AiAgentSpec.model_validate(
        {"triggerName": "ai-nightly", "enabled": enabled, "eventTriggers": list(triggers)}
    )


def scheduled(cron: str, **more: Any) -> dict[str, Any]:
    return {"source": "schedule", "schedule": {"cron": cron, **more}}


def test_runs_of_an_agent() -> None:
    agent = spec(
        {"source": "github", "events": ["issues.opened"]},
        scheduled("0 3 * * *", timeZone="Europe/Paris"),
        scheduled("61 * * * *"),
        scheduled("*/30 * * * *"),
    )
    found = schedules.runs("ns", agent, None, at(2026, 1, 15, 2, 0, 30))
    assert [(r.index, r.tick) for r in found] == [
        (1, at(2026, 1, 15, 2, 0)),
        (3, at(2026, 1, 15, 2, 0)),
    ]
    assert found[0].seed != found[1].seed
    assert found[0].until == at(2026, 1, 15, 2, 5)


def test_a_disabled_agent_wants_no_run() -> None:
    agent = spec(scheduled("* * * * *"), enabled=False)
    assert schedules.runs("ns", agent, None, at(2026, 1, 15, 2, 0, 30)) == []


def test_the_event_is_the_tick_and_the_schedule_only() -> None:
    agent = spec(scheduled("0 3 * * *", timeZone="Europe/Paris"))
    (run,) = schedules.runs("ns", agent, None, at(2026, 1, 15, 2, 1))
    event = schedules.event_of(run)
    assert event.source == "schedule" and event.scheduled_at == "2026-01-15T03:00:00+01:00"
    assert event.schedule == "0 3 * * * in Europe/Paris"
    assert (event.repository, event.installation_id, event.number, event.sender) == (None,) * 4


def test_the_scheduled_condition() -> None:
    good = schedules.readiness(spec(scheduled("0 3 * * *")))
    assert (good.ready, good.reason) == (True, Reason.SCHEDULE_VALID)
    assert good.message == "Runs on 0 3 * * * in UTC."
    bad = schedules.readiness(spec(scheduled("0 3 * * *"), scheduled("0 0 30 2 *")))
    assert (bad.ready, bad.reason) == (False, Reason.INVALID_SCHEDULE)
    assert bad.message.startswith("eventTriggers[1]: cron expression '0 0 30 2 *'")


def test_source_and_schedule_go_together() -> None:
    with_schedule = spec(scheduled("* * * * *"))
    assert schedules.has_schedule(with_schedule)
    assert not schedules.has_schedule(spec({"source": "manual"}))


def test_a_scheduled_run_follows_its_own_triggers_next() -> None:
    agent = spec(
        {"source": "manual", "next": {"agentTriggerName": "ai-manual"}},
        scheduled("0 3 * * *") | {"next": {"agentTriggerName": "ai-first"}},
        scheduled("0 4 * * *") | {"next": {"agentTriggerName": "ai-second"}},
    )
    (run,) = schedules.runs("ns", agent, None, at(2026, 1, 15, 4, 0))
    step = trigger_step(agent, "schedule", schedules.event_of(run))
    assert step is not None and step.agent_trigger_name == "ai-second"


def _runs_over(cron: str, day: tuple[int, int, int]) -> list[str]:
    """The distinct ticks a leader looking every 30 s finds due around ``day``'s night."""
    parsed = schedules.parse(sched(cron, "Europe/Paris"))
    start = dt.datetime(*day, tzinfo=UTC) - dt.timedelta(hours=1)
    found = {schedules.due(parsed, start + dt.timedelta(seconds=30 * i), None) for i in range(600)}
    return sorted(t.astimezone(UTC).strftime("%H:%M") for t in found if t is not None)


def test_daylight_saving_days() -> None:
    assert _runs_over("30 2 * * *", (2026, 3, 29)) == ["01:00"]  # 03:00 CEST, after the gap.
    assert _runs_over("30 2 * * *", (2026, 10, 25)) == ["00:30"]  # 02:30 CEST, once.
    hourly = _runs_over("0 * * * *", (2026, 10, 25))
    assert "01:00" not in hourly and {"00:00", "02:00"} <= set(hourly)
