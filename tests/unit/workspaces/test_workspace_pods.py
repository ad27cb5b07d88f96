"""When a workspace job's attempt ends, from its pod (``hop/attempts``, issue 18).

The agent of a workspace job runs as an init container between ``workspace-prepare``
and the ``workspace-report`` container.  Aspects covered: an agent still running, or
done with exit 0 while the report runs, has not ended its attempt; a non-zero exit ends
it at once (no report follows); exit 0 ends it once the report ended; a failed prepare
ends it with no pod to read and says why; the watch's trimmed pod keeps the init
containers' states; a pod without a workspace reads as before.
"""

from __future__ import annotations

from typing import Any

from agentchain.handlers import podevents
from agentchain.hop import attempts


def _state(state: str, code: int | None = None) -> dict[str, Any]:
    if state == "terminated":
        return {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    return {state: {}}


def _pod(prepare: dict[str, Any], agent: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "fix-1-abcde", "namespace": "team-a"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "workspace-prepare", "state": prepare},
                {"name": "agent", "state": agent},
            ],
            "containerStatuses": [{"name": "workspace-report", "state": report}],
        },
    }


DONE = _state("terminated", 0)
WAITING = _state("waiting")


def test_running_agent_has_not_ended() -> None:
    pod = _pod(DONE, _state("running"), WAITING)
    assert attempts.terminated_state(pod) is None
    assert attempts._agent_running(pod)


def test_exit_zero_waits_for_the_report() -> None:
    assert attempts.terminated_state(_pod(DONE, DONE, _state("running"))) is None
    ended = attempts.terminated_state(_pod(DONE, DONE, DONE))
    assert ended is not None and ended["exitCode"] == 0


def test_a_failed_agent_ends_at_once() -> None:
    ended = attempts.terminated_state(_pod(DONE, _state("terminated", 3), WAITING))
    assert ended is not None and ended["exitCode"] == 3
    exit = attempts._pod_exit(_pod(DONE, _state("terminated", 3), WAITING), ended, 1, "b", "o")
    assert (exit.exit_code, exit.pod) == (3, "fix-1-abcde")


def test_a_failed_prepare_ends_without_output_and_says_why() -> None:
    pod = _pod(_state("terminated", 4), WAITING, WAITING)
    ended = attempts.terminated_state(pod)
    assert ended is not None
    exit = attempts._pod_exit(pod, ended, 2, "b", "o")
    assert (exit.exit_code, exit.pod, exit.attempt, exit.prepare_exit) == (None, None, 2, 4)
    assert exit.lost is not None and "workspace-prepare" in exit.lost and "code 4" in exit.lost


def test_trimmed_pod_keeps_init_container_states() -> None:
    pod = _pod(DONE, DONE, DONE)
    trimmed = podevents.trim_pod(pod)
    assert attempts.terminated_state(trimmed) == attempts.terminated_state(pod)
    assert trimmed["status"]["initContainerStatuses"][1]["name"] == "agent"


def test_a_pod_without_workspace_reads_as_before() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "n"},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "agent", "state": DONE}]},
    }
    assert attempts.terminated_state(pod) == DONE["terminated"]
    assert attempts.terminated_state(podevents.trim_pod(pod)) == DONE["terminated"]
