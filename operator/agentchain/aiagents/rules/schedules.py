"""Scheduled triggers: which tick of a cron schedule is due now, and its run's names.

Pure decisions over a ``schedule`` trigger and a moment, so the scheduler
(``handlers/scheduling.py``) only reads the clock and creates the AgentJob this module
names.  The cron expression is parsed by croniter; the time zone is an IANA name read
by ``zoneinfo``.

Expressions: five fields (minute, hour, day of month, month, day of week), a six-field
form whose FIRST field is seconds (as in Quartz and Spring; for short periods in tests
and for sub-minute sweeps), or a macro (``@hourly``, ``@daily``, ``@weekly``,
``@monthly``, ``@yearly``, ``@annually``, ``@midnight``).  ``@reboot`` and the seven-field
form with years are refused.  Daylight saving time follows croniter: a wall-clock time
that does not exist on a spring-forward day runs at the first instant after the gap,
and one that happens twice on a fall-back day runs once.

Missed ticks follow a Kubernetes CronJob with ``startingDeadlineSeconds``: at most ONE
run catches up, the latest tick that was missed, and only when it is no older than the
deadline (``startingDeadlineSeconds``, default :data:`DEFAULT_STARTING_DEADLINE_SECONDS`);
older ticks are skipped.  A tick before the AiAgent existed never runs (as a CronJob
counts from its creation).  So an operator down for an hour does not run a nightly job
sixty times, and an operator down for two days does not run yesterday's nightly at noon.

Exactly once: a tick's AgentJob is named from the agent, the schedule and the tick's
instant (:func:`tick_seed`), so every replica and every restart that finds the same tick
due names the same AgentJob, and the API server's ``AlreadyExists`` says it was done.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from agentchain.aiagents.rules.resolution import Readiness
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec, TriggerSchedule
from agentchain.models.conditions import Reason

DEFAULT_STARTING_DEADLINE_SECONDS = 300
MACROS = frozenset(
    {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}
)
CRON_MAX_CHARS = 256


class ScheduleError(ValueError):
    """A schedule the operator cannot follow; the message says why, for a condition."""


@dataclass(frozen=True)
class Parsed:
    """A valid schedule: its expression as croniter reads it, and its zone."""

    cron: str
    zone: ZoneInfo
    seconds_first: bool
    deadline: dt.timedelta

    def previous(self, at: dt.datetime) -> dt.datetime:
        """The latest tick at or before ``at`` (in the schedule's zone)."""
        local = at.astimezone(self.zone)
        # croniter's get_prev is strictly before its start: start a hair after ``at``.
        it = croniter(
            self.cron,
            local + dt.timedelta(microseconds=1),
            second_at_beginning=self.seconds_first,
        )
        found: dt.datetime = it.get_prev(dt.datetime)
        return found

    def following(self, at: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``at``."""
        it = croniter(self.cron, at.astimezone(self.zone), second_at_beginning=self.seconds_first)
        found: dt.datetime = it.get_next(dt.datetime)
        return found


def describe(schedule: TriggerSchedule) -> str:
    """``<cron> in <zone>``: how events, conditions and logs name a schedule."""
    return schedule.describe()


def parse(schedule: TriggerSchedule) -> Parsed:
    """The schedule, checked; raises :class:`ScheduleError` with a sentence saying why."""
    cron = " ".join(schedule.cron.split())
    fields = cron.split(" ")
    if len(cron) > CRON_MAX_CHARS:
        raise ScheduleError(f"cron expression longer than {CRON_MAX_CHARS} characters")
    if len(fields) == 1 and fields[0].startswith("@"):
        if fields[0].lower() not in MACROS:
            raise ScheduleError(f"cron macro {fields[0]} is not one of {', '.join(sorted(MACROS))}")
    elif len(fields) not in (5, 6):
        raise ScheduleError(
            f"cron expression {cron!r} has {len(fields)} fields: give 5 (minute hour "
            "day-of-month month day-of-week) or 6 (seconds first)"
        )
    try:
        zone = ZoneInfo(schedule.time_zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"time zone {schedule.time_zone!r} is not an IANA zone") from exc
    deadline = schedule.starting_deadline_seconds
    parsed = Parsed(
        cron,
        zone,
        seconds_first=len(fields) == 6,
        deadline=dt.timedelta(
            seconds=DEFAULT_STARTING_DEADLINE_SECONDS if deadline is None else deadline
        ),
    )
    try:
        # Parses the fields, and finds an expression that never fires (30 February).
        parsed.following(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except (CroniterBadCronError, CroniterBadDateError, CroniterError, ValueError) as exc:
        raise ScheduleError(f"cron expression {cron!r}: {exc}") from exc
    return parsed


def validity(spec: AiAgentSpec) -> str | None:
    """Why one of ``spec``'s schedules cannot be followed (None: all can, or it has none)."""
    for index, trigger in enumerate(spec.event_triggers):
        if trigger.source != "schedule":
            continue
        if trigger.schedule is None:
            return f"eventTriggers[{index}]: source schedule needs a schedule"
        try:
            parse(trigger.schedule)
        except ScheduleError as exc:
            return f"eventTriggers[{index}]: {exc}"
    return None


def has_schedule(spec: AiAgentSpec) -> bool:
    return any(t.source == "schedule" for t in spec.event_triggers)


def readiness(spec: AiAgentSpec) -> Readiness:
    """The ``Scheduled`` condition of an agent with a schedule trigger."""
    why = validity(spec)
    if why is not None:
        return Readiness(False, Reason.INVALID_SCHEDULE, f"{why}; this schedule never fires.")
    named = [describe(t.schedule) for t in spec.event_triggers if t.schedule is not None]
    if not named:
        return Readiness(True, Reason.SCHEDULE_VALID, "The agent has no schedule trigger.")
    return Readiness(True, Reason.SCHEDULE_VALID, f"Runs on {'; '.join(named)}.")


def due(parsed: Parsed, now: dt.datetime, created: dt.datetime | None) -> dt.datetime | None:
    """The tick to run at ``now``: the latest one not after ``now``, when it is within the
    starting deadline and not before ``created`` (the AiAgent's creation); else None."""
    try:
        tick = parsed.previous(now)
    except (CroniterBadDateError, CroniterError, ValueError):
        return None
    not_before = now - parsed.deadline
    if created is not None:
        not_before = max(not_before, created)
    return tick if tick >= not_before else None


def tick_seed(namespace: str, agent: str, schedule: TriggerSchedule, tick: dt.datetime) -> str:
    """What names a tick's run: the same for every replica and restart that finds it due.

    The instant is in UTC, so the same tick seen in another zone (a changed ``timeZone``
    naming the same instant) is one run, and a fall-back hour's two wall-clock readings
    are two instants.
    """
    instant = tick.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"schedule/{namespace}/{agent}/{describe(schedule)}/{instant}"


def local_iso(tick: dt.datetime, schedule: TriggerSchedule) -> str:
    """The tick as its agent sees it: ISO 8601 in the schedule's zone, with its offset."""
    return tick.astimezone(ZoneInfo(schedule.time_zone)).isoformat()


@dataclass(frozen=True)
class Run:
    """One tick of one schedule trigger that is due: what its AgentJob is made of."""

    index: int
    schedule: TriggerSchedule
    tick: dt.datetime
    seed: str
    until: dt.datetime
    """Past this instant the tick is no longer due: the scheduler forgets it was done."""


def runs(
    namespace: str, spec: AiAgentSpec, created: dt.datetime | None, now: dt.datetime
) -> list[Run]:
    """The runs ``spec``'s schedule triggers want at ``now`` (none when it is disabled;
    a schedule that cannot be parsed is skipped, its condition says why)."""
    if not spec.enabled:
        return []
    found: list[Run] = []
    for index, trigger in enumerate(spec.event_triggers):
        if trigger.source != "schedule" or trigger.schedule is None:
            continue
        try:
            parsed = parse(trigger.schedule)
        except ScheduleError:
            continue
        tick = due(parsed, now, created)
        if tick is None:
            continue
        seed = tick_seed(namespace, spec.trigger_name, trigger.schedule, tick)
        found.append(Run(index, trigger.schedule, tick, seed, tick + parsed.deadline))
    return found


def event_of(run: Run) -> JobEvent:
    """The scheduled run's event: no GitHub event, the tick and the schedule as data."""
    at = local_iso(run.tick, run.schedule)
    return JobEvent(
        source="schedule",
        name="schedule",
        title=f"run for {at} ({describe(run.schedule)})",
        schedule=describe(run.schedule),
        scheduled_at=at,
    )
