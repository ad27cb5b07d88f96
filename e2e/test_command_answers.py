"""Comment commands answered on GitHub (issue 16), with the operator as a GitHub App.

The operator runs as the App against the GitHub stand-in (``e2e/githubloop.py``, as in
``test_github_writeback.py``); the comments are written in the stand-in first, so the
deliveries name real comment ids, and every request the operator makes is checked
against GitHub's OpenAPI description (the ``github`` fixture).

Aspects covered, on one approval gate:
- a stranger's ``/agentchain approve`` changes nothing and gets nothing on GitHub: no
  reaction, no reply (the webhook's answer says so);
- an allowed approver's ``/agentchain approve`` lets the job run and gets one ``+1``
  reaction by the App on that comment; the same delivery redelivered reacts no more
  (one reaction request in all);
- the owner's command with nothing left to act on gets a ``confused`` reaction and a
  short reply saying why;
- by default (``approval: {}``) GitHub decides who may approve: a MEMBER whose role
  GitHub reports as read (triage) is refused, one reported as write (maintain)
  approves, each asked once (``repos/get-collaborator-permission-level``); the same
  comment delivered again under a new delivery id and body does not act again.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.github import GitHubStandIn
from e2e.githubloop import ISSUE, REPOSITORY, Installed, app_operator, install

Obj = dict[str, Any]
BOT = "agentchain[bot]"


def _labeled(installation: int) -> Obj:
    return {
        "action": "labeled",
        "label": {"name": "agent"},
        "issue": {
            "id": uuid.uuid4().int >> 80,
            "number": ISSUE,
            "title": "Spelling error in the README file",
            "body": "Please.",
            "author_association": "OWNER",
            "labels": [{"name": "agent"}],
            "user": {"login": "Codertocat", "type": "User"},
        },
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": "Codertocat", "type": "User"},
        "installation": {"id": installation},
    }


def _command(installed: Installed, login: str, association: str, body: str) -> tuple[int, Obj]:
    """The comment written on the stand-in, and GitHub's delivery of it."""
    comment = installed.github.add_comment(REPOSITORY, ISSUE, body, author=login)
    payload = {
        "action": "created",
        "issue": {"number": ISSUE, "title": "Spelling error", "user": {"login": "Codertocat"}},
        "comment": {
            "id": comment.id,
            "body": body,
            "author_association": association,
            "user": {"login": login, "type": "User"},
        },
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": login, "type": "User"},
        "installation": {"id": installed.installation.id},
    }
    return comment.id, payload


def _send(
    op: operating.OperatorProcess, payload: Obj, event: str
) -> tuple[Obj, bytes, dict[str, str]]:
    body, headers = delivering.signed(op.webhook_secret, payload, event=event)
    code, answer = delivering.send(op, body, headers)
    assert code in (200, 202), answer
    return answer, body, headers


def _phase(info: ClusterInfo, namespace: str, name: str) -> str:
    found = info.kubectl("get", "agentjob", name, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return ""
    return str((json.loads(found.stdout).get("status") or {}).get("phase") or "")


def _reactions(installed: Installed, comment_id: int) -> list[tuple[str, str]]:
    return [(r.author, r.content) for r in installed.github.reactions(comment_id)]


def test_commands_are_answered_on_github_but_not_for_strangers(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info, installed = cluster_info, install(github, tmp_path)
    agent = chaining.agent("gated", "--no-context", github="issues.labeled")
    agent["spec"]["approval"] = {"approvers": ["carol"], "associations": ["OWNER"]}
    with app_operator(operator, info, namespace, installed) as op:
        chaining.apply(info, namespace, agent)
        time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
        started, _, _ = _send(op, _labeled(installed.installation.id), "issues")
        [name] = [j["name"] for j in started["jobs"] if j["namespace"] == namespace]
        operating.wait_until(
            lambda: _phase(info, namespace, name) == "AwaitingApproval", timeout=90, what="the gate"
        )

        stranger_id, stranger = _command(installed, "mallory", "NONE", "/agentchain approve")
        refused, _, _ = _send(op, stranger, "issue_comment")
        assert refused["command"]["result"] == "refused", refused
        assert refused["command"]["reply"].startswith("nothing on GitHub"), refused

        carol_id, carol = _command(installed, "carol", "CONTRIBUTOR", "/agentchain approve")
        approved, body, headers = _send(op, carol, "issue_comment")
        assert approved["command"]["result"] == "applied", approved
        assert approved["command"]["reply"] == "reaction +1 on GitHub", approved
        operating.wait_until(
            lambda: _reactions(installed, carol_id), timeout=30, what="the reaction", interval=0.3
        )
        assert _reactions(installed, carol_id) == [(BOT, "+1")]
        delivering.send(op, body, headers)  # GitHub redelivers the same delivery.
        operating.wait_until(
            lambda: _phase(info, namespace, name) == "Succeeded",
            timeout=90,
            what="the approved job",
        )

        owner_id, owner = _command(installed, "Codertocat", "OWNER", "/agentchain approve")
        late, _, _ = _send(op, owner, "issue_comment")
        assert late["command"]["reply"] == "reaction confused and a reply on GitHub", late
        operating.wait_until(
            lambda: [c for c in installed.comments() if "changed nothing" in c.body],
            timeout=30,
            what="the reply",
            interval=0.3,
        )
        [reply] = [c for c in installed.comments() if "changed nothing" in c.body]
        assert reply.author == BOT and reply.body.startswith(
            "`/agentchain approve` changed nothing"
        )
        assert f"`{name}`: it ended Succeeded" in reply.body, reply.body
        assert _reactions(installed, owner_id) == [(BOT, "confused")]

        def nothing_more() -> bool:
            assert _reactions(installed, stranger_id) == []
            assert _reactions(installed, carol_id) == [(BOT, "+1")]
            assert len(github.requests("reactions/create-for-issue-comment")) == 2
            bot_replies = [c for c in installed.comments() if "changed nothing" in c.body]
            assert bot_replies == [reply]
            return True

        # Room for anything a stranger or the redelivery might have caused.
        operating.stays(nothing_more, seconds=2, what="no answer to a stranger or a redelivery")


def test_by_default_whoever_github_says_may_write_approves_once(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    github: GitHubStandIn,
    tmp_path: Path,
) -> None:
    info, installed = cluster_info, install(github, tmp_path)
    github.add_collaborator(REPOSITORY, "rita", "triage")  # GitHub reports it as read.
    github.add_collaborator(REPOSITORY, "dana", "maintain")  # GitHub reports it as write.
    agent = chaining.agent("gated", "--no-context", github="issues.labeled")
    agent["spec"]["approval"] = {}  # The defaults: write permission on the repository.
    with app_operator(operator, info, namespace, installed) as op:
        chaining.apply(info, namespace, agent)
        time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.
        started, _, _ = _send(op, _labeled(installed.installation.id), "issues")
        [name] = [j["name"] for j in started["jobs"] if j["namespace"] == namespace]
        operating.wait_until(
            lambda: _phase(info, namespace, name) == "AwaitingApproval", timeout=90, what="the gate"
        )

        _, rita = _command(installed, "rita", "MEMBER", "/agentchain approve")
        refused, _, _ = _send(op, rita, "issue_comment")
        assert refused["command"]["result"] == "refused", refused
        asked = github.requests("repos/get-collaborator-permission-level")
        assert [(r.path, r.status) for r in asked] == [
            (f"/repos/{REPOSITORY}/collaborators/rita/permission", 200)
        ]

        dana_id, dana = _command(installed, "dana", "MEMBER", "/agentchain approve")
        approved, _, _ = _send(op, dana, "issue_comment")
        assert approved["command"]["result"] == "applied", approved
        # The same comment again under a new delivery id and body: it does not act twice.
        again = {**dana, "issue": {**dana["issue"], "title": "Spelling error (edited)"}}
        duplicate, _, _ = _send(op, again, "issue_comment")
        assert duplicate["command"]["result"] == "duplicate", duplicate
        operating.wait_until(
            lambda: _phase(info, namespace, name) == "Succeeded",
            timeout=90,
            what="the approved job",
        )
        assert len(github.requests("repos/get-collaborator-permission-level")) == 2
        operating.wait_until(
            lambda: _reactions(installed, dana_id), timeout=30, what="the reaction", interval=0.3
        )
        assert _reactions(installed, dana_id) == [(BOT, "+1")]
