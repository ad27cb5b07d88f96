"""Mention, label, assignment and schedule triggers on the real control plane.

Aspects covered:
- a comment mentioning the App (``@<slug>``), a label added to a pull request and an
  issue assigned to the App each start their agent's chain exactly once across a
  SIGKILL of the operator right after the deliveries were answered, and a GitHub
  redelivery of each afterwards starts nothing more; a comment that mentions the App
  only inside code, and a label event for another label, start nothing;
- a schedule starts one run per tick across a SIGKILL right after the tick's AgentJob
  was created (the restarted operator finds the same tick due and creates nothing
  twice), and a tick missed while the operator was down runs once, late, when it comes
  back within the starting deadline;
- a schedule across a leader failover (two replicas, one Lease): the new leader finds
  the tick the killed one had started and starts it no second time;
- the API server refuses a schedule trigger without a schedule, a schedule on another
  source, and a cron expression with a wrong number of fields, each with its message;
- a bad cron expression is ``Scheduled=False`` (``InvalidSchedule``) with a Warning
  Event, and the operator goes on;
- an operator that is a GitHub App (the stand-in) and has no slug configured asks GitHub
  (``GET /app``) and matches mentions of its slug; the App's own comment mentioning
  itself starts nothing.

Each schedule names one second of the minute a few seconds ahead (``"<s> * * * * *"``,
seconds first), so its tick comes soon and the next one a minute later, after the test.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import chaining, delivering, githubloop, operating, replicating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn

Obj = dict[str, Any]
SLUG = "chain-e2e"
QUICK = chaining.python_command("print('ran')")
SCHEDULE_ENV = {"AGENTCHAIN_SCHEDULE_TICK_SECONDS": "0.5"}
APP_ENV = {"AGENTCHAIN_GITHUB_APP_SLUG": SLUG, **SCHEDULE_ENV}


@pytest.fixture
def app_operator(operator: operating.OperatorProcess) -> Iterator[operating.OperatorProcess]:
    """The session operator, knowing the App's slug and looking for ticks twice a second.

    The variables stay set for its later restarts within the test and are dropped after;
    it keeps running with them (they change nothing for other tests' agents).
    """
    saved = dict(operator.extra_env)
    operator.extra_env = {**saved, **APP_ENV}
    operator.kill()
    operator.start()
    try:
        yield operator
    finally:
        operator.extra_env = saved


def _jobs(info: ClusterInfo, namespace: str) -> list[Obj]:
    items: list[Obj] = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
    return items


def _batch_jobs(info: ClusterInfo, namespace: str) -> list[Obj]:
    items: list[Obj] = operating.get_json(info, "jobs", "-n", namespace)["items"]
    return items


def _wait_ready(info: ClusterInfo, namespace: str, *names: str) -> None:
    def ready() -> bool:
        for name in names:
            agent = operating.get_json(info, "aiagent", name, "-n", namespace)
            conditions = (agent.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return False
        return True

    operating.wait_until(ready, timeout=30, what=f"{names} Ready")
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.


def _all_ended_once(info: ClusterInfo, namespace: str, count: int) -> bool:
    jobs = _jobs(info, namespace)
    ended = [j for j in jobs if (j.get("status") or {}).get("phase") == "Succeeded"]
    return len(jobs) == count and len(ended) == count


# --------------------------------------------------------------------------- GitHub


def _subject(number: int, author: str = "alice", **more: Any) -> Obj:
    return {
        "id": uuid.uuid4().int >> 80,
        "number": number,
        "title": "Flaky login test",
        "body": "It fails one run in ten.",
        "html_url": f"https://github.com/acme/webapp/issues/{number}",
        "author_association": "OWNER",
        "labels": [],
        "user": {"login": author, "type": "User"},
        **more,
    }


def _base(action: str) -> Obj:
    return {
        "action": action,
        "repository": {"full_name": "acme/webapp", "private": False},
        "sender": {"login": "alice", "type": "User"},
    }


def _comment(number: int, body: str) -> tuple[str, Obj]:
    comment = {
        "id": uuid.uuid4().int >> 80,
        "body": body,
        "author_association": "OWNER",
        "user": {"login": "alice", "type": "User"},
        "html_url": f"https://github.com/acme/webapp/issues/{number}#issuecomment-1",
    }
    return "issue_comment", _base("created") | {"issue": _subject(number), "comment": comment}


def _pr_labeled(number: int, added: str, *present: str) -> tuple[str, Obj]:
    labels = [{"name": n} for n in (*present, added)]
    pr = _subject(number, labels=labels, head={"sha": "a" * 40, "repo": None})
    return "pull_request", _base("labeled") | {"pull_request": pr, "label": {"name": added}}


def _assigned(number: int, login: str) -> tuple[str, Obj]:
    return "issues", _base("assigned") | {
        "issue": _subject(number),
        "assignee": {"login": login, "type": "Bot"},
    }


def _agents() -> list[Obj]:
    def one(trigger: str, events: list[str], filters: Obj) -> Obj:
        entry = {"source": "github", "events": events, "filters": filters}
        return chaining.ai_agent(trigger, QUICK, triggers=[entry])

    return [
        one("ai-mentioned", ["issue_comment.created"], {"mention": True}),
        one("ai-labelled", ["pull_request.labeled"], {"label": "agent"}),
        one("ai-assigned", ["issues.assigned"], {"assignedToApp": True}),
    ]


def _send(op: operating.OperatorProcess, event: str, payload: Obj) -> tuple[bytes, dict[str, str]]:
    body, headers = delivering.signed(op.webhook_secret, payload, event=event)
    return body, headers


def _jobs_started(answer: Obj, namespace: str) -> list[str]:
    return [j["name"] for j in answer["jobs"] if j["namespace"] == namespace]


@pytest.mark.timeout(120)
def test_mention_label_and_assignment_start_once_across_a_sigkill(
    app_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info, op = cluster_info, app_operator
    chaining.apply(info, namespace, *_agents())
    _wait_ready(info, namespace, "ai-mentioned", "ai-labelled", "ai-assigned")

    starting = [
        _comment(11, f"@{SLUG} please find the flake"),
        _pr_labeled(12, "agent", "bug"),
        _assigned(13, f"{SLUG}[bot]"),
    ]
    nothing = [
        _comment(14, f"Ask it with `@{SLUG} fix`, like this:\n> @{SLUG} fix"),
        _pr_labeled(15, "bug", "agent"),  # "agent" was there already: not just added.
        _assigned(16, "alice"),
    ]
    sent: list[tuple[bytes, dict[str, str]]] = []
    names: list[str] = []
    for event, payload in starting:
        body, headers = _send(op, event, payload)
        code, answer = delivering.send(op, body, headers)
        assert code == 202, answer
        started = _jobs_started(answer, namespace)
        assert len(started) == 1, answer
        names += started
        sent.append((body, headers))
    for event, payload in nothing:
        body, headers = _send(op, event, payload)
        code, answer = delivering.send(op, body, headers)
        assert _jobs_started(answer, namespace) == [], answer
    op.kill()  # Answered, maybe not yet created, certainly not yet run.
    op.start()
    for body, headers in sent:  # GitHub's redelivery of each: nothing more.
        code, answer = delivering.send(op, body, headers)
        assert answer["duplicate"] is True, answer

    operating.wait_until(
        lambda: _all_ended_once(info, namespace, 3), timeout=60, what="three runs ended"
    )
    jobs = _jobs(info, namespace)
    assert sorted(j["metadata"]["name"] for j in jobs) == sorted(names)
    assert sorted(j["spec"]["agentRole"] for j in jobs) == [
        "ai-assigned",
        "ai-labelled",
        "ai-mentioned",
    ]
    assert len(_batch_jobs(info, namespace)) == 3  # Each ran once.
    operating.stays(lambda: len(_jobs(info, namespace)) == 3, seconds=2, what="no further job")


# --------------------------------------------------------------------------- schedules


def _second_ahead(seconds: float) -> tuple[str, dt.datetime]:
    """A cron expression firing once a minute, ``seconds`` from now (at least), and its
    first tick."""
    tick = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).replace(microsecond=0)
    tick += dt.timedelta(seconds=1)
    return f"{tick.second} * * * * *", tick


def _scheduled_agent(trigger: str, cron: str, **schedule: Any) -> Obj:
    entry = {"source": "schedule", "schedule": {"cron": cron, **schedule}}
    return chaining.ai_agent(trigger, QUICK, triggers=[entry])


def _scheduled_jobs(info: ClusterInfo, namespace: str) -> list[Obj]:
    return [j for j in _jobs(info, namespace) if j["spec"].get("origin") == "schedule"]


def _wait_until_utc(when: dt.datetime) -> None:
    time.sleep(max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds()))


def _assert_one_run_for(info: ClusterInfo, namespace: str, tick: dt.datetime) -> None:
    def ended() -> bool:
        jobs = _scheduled_jobs(info, namespace)
        assert len(jobs) <= 1, [j["metadata"]["name"] for j in jobs]  # A second run: fail now.
        return _all_ended_once(info, namespace, 1)

    operating.wait_until(ended, timeout=40, what="the tick's run ended")
    [job] = _scheduled_jobs(info, namespace)
    at = dt.datetime.fromisoformat(job["spec"]["event"]["scheduledAt"])
    assert at == tick, job["spec"]["event"]
    # The run is said once on its AiAgent, however many replicas found it.
    agent = job["spec"]["agentRole"]
    said = [
        e["message"] for e in chaining.events_for(info, namespace, agent)
        if e.get("reason") == "ScheduledRunCreated"
    ]  # fmt: skip
    assert len(said) == 1 and said[0].endswith(f"as {job['metadata']['name']}"), said
    assert len(_batch_jobs(info, namespace)) == 1


@pytest.mark.timeout(90)
def test_a_schedule_runs_each_tick_once_across_a_sigkill(
    app_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info, op = cluster_info, app_operator
    cron, tick = _second_ahead(6)
    chaining.apply(info, namespace, _scheduled_agent("ai-nightly", cron))
    operating.wait_until(
        lambda: _scheduled_jobs(info, namespace), timeout=20, interval=0.1, what="the tick's job"
    )
    op.kill()  # Right after the create: the restarted operator finds the same tick due.
    op.start()
    time.sleep(2)  # Four passes of the restarted scheduler, the tick still due.
    _assert_one_run_for(info, namespace, tick)


@pytest.mark.timeout(90)
def test_a_tick_missed_while_down_runs_once_late(
    app_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info, op = cluster_info, app_operator
    cron, tick = _second_ahead(6)
    chaining.apply(info, namespace, _scheduled_agent("ai-sweep", cron, startingDeadlineSeconds=60))
    time.sleep(1)  # The leader has seen the agent (its condition is written).
    op.kill()
    _wait_until_utc(tick + dt.timedelta(seconds=2))
    assert _scheduled_jobs(info, namespace) == []
    op.start()
    _assert_one_run_for(info, namespace, tick)


REFUSED: list[tuple[Obj, str]] = [
    ({"source": "schedule"}, "source schedule needs a schedule, and only it has one"),
    (
        {"source": "manual", "schedule": {"cron": "0 3 * * *"}},
        "source schedule needs a schedule, and only it has one",
    ),
    ({"source": "schedule", "schedule": {"cron": "0 3 * *"}}, "should match"),
    (
        {"source": "schedule", "schedule": {"cron": "0 3 * * *", "timeZone": "../etc"}},
        "should match",
    ),
]


def test_the_api_server_refuses_malformed_schedule_triggers(
    installed: ClusterInfo, namespace: str
) -> None:
    for trigger, message in REFUSED:
        manifest = chaining.ai_agent("ai-refused", QUICK, triggers=[trigger])
        done = installed.kubectl(
            "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest), check=False
        )
        assert done.returncode != 0, trigger
        assert message in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_a_bad_cron_is_a_condition_and_an_event(
    app_operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, _scheduled_agent("ai-never", "0 0 30 2 *"))

    def condition() -> Obj | None:
        agent = operating.get_json(info, "aiagent", "ai-never", "-n", namespace)
        found = [c for c in (agent.get("status") or {}).get("conditions") or []]
        return next((c for c in found if c["type"] == "Scheduled"), None)

    operating.wait_until(condition, timeout=30, what="the Scheduled condition")
    scheduled = condition()
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidSchedule")
    assert "0 0 30 2 *" in scheduled["message"]
    events = operating.get_json(info, "events", "-n", namespace)["items"]
    assert any(e["reason"] == "InvalidSchedule" and e["type"] == "Warning" for e in events)
    assert app_operator.process is not None and app_operator.process.alive()


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("operator_paused", "installed")
def test_a_schedule_runs_its_tick_once_across_a_leader_failover(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    with replicating.replicas(info, namespace, extra_env=SCHEDULE_ENV) as ops:
        old = replicating.leader(ops)
        cron, tick = _second_ahead(5)
        chaining.apply(info, namespace, _scheduled_agent("ai-failover", cron))
        operating.wait_until(
            lambda: _scheduled_jobs(info, namespace), timeout=20, interval=0.1, what="tick job"
        )
        old.kill()  # The tick's job exists; the new leader will find the tick due.
        new = replicating.leader([op for op in ops if op is not old], timeout=40)
        assert new is not old
        time.sleep(2)  # Its scheduler's first passes, the tick still due.
        _assert_one_run_for(info, namespace, tick)


def _app_comment(installed: githubloop.Installed, login: str, kind: str, body: str) -> Obj:
    comment = installed.github.add_comment(
        githubloop.REPOSITORY, githubloop.ISSUE, body, author=login
    )
    return {
        "action": "created",
        "issue": {"number": githubloop.ISSUE, "title": "Spelling", "user": {"login": "Codertocat"}},
        "comment": {
            "id": comment.id,
            "body": body,
            "author_association": "OWNER" if kind == "User" else "NONE",
            "user": {"login": login, "type": kind},
        },
        "repository": {"full_name": githubloop.REPOSITORY, "private": False},
        "sender": {"login": login, "type": kind},
        "installation": {"id": installed.installation.id},
    }


@pytest.mark.timeout(120)
def test_an_app_learns_its_slug_from_github_and_never_starts_itself(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info, installed = cluster_info, githubloop.install(github, tmp_path)
    slug = installed.app.slug
    agent = _agents()[0]  # ai-mentioned: issue_comment.created with mention: true.
    with githubloop.app_operator(operator, info, namespace, installed) as op:
        chaining.apply(info, namespace, agent)
        _wait_ready(info, namespace, "ai-mentioned")
        own = _app_comment(installed, f"{slug}[bot]", "Bot", f"@{slug} again")
        body, headers = _send(op, "issue_comment", own)
        _, answer = delivering.send(op, body, headers)
        assert _jobs_started(answer, namespace) == [], answer
        mention = _app_comment(installed, "Codertocat", "User", f"@{slug} fix the typo")
        body, headers = _send(op, "issue_comment", mention)
        code, answer = delivering.send(op, body, headers)
        assert code == 202 and len(_jobs_started(answer, namespace)) == 1, answer
        assert github.requests("apps/get-authenticated"), "the slug was not asked of GitHub"
        operating.wait_until(
            lambda: _all_ended_once(info, namespace, 1), timeout=60, what="the run ended"
        )
