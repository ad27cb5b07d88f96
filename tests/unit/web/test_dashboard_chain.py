"""The dashboard's chain page renders every ``status.next`` shape (a fuzz finding).

Aspects covered: a step with no agent (``none``, ``stopped``) and one without a reason
render instead of failing the page with a 500 (the templates use StrictUndefined).
"""

from __future__ import annotations

from agentchain.web import dashboard


def test_next_steps_without_agent_or_reason_render() -> None:
    job = {
        "id": "j",
        "namespace": "ns",
        "agentRole": "a",
        "status": "completed",
        "next": [
            {"action": "none", "reason": "ChainComplete"},
            {"action": "spawned", "agent": "b"},
        ],
        "children": [],
    }
    response = dashboard.render(
        "chain.html",
        chain={"chainId": "c", "namespace": "ns", "jobCount": 1, "complete": False, "roots": [job]},
    )
    assert response.text is not None
    assert "none" in response.text and "(ChainComplete)" in response.text and "b" in response.text
