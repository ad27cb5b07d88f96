"""A job's answer handed over through the job API, on the real control plane.

Aspects covered:
- an agent that hands its final answer over with its own token (the runner's
  ``hand_over``, as ``agentchain agent run`` does) and prints a transcript on stderr:
  its output (``status.result``) and the next job's ``<chain-context>`` carry the answer
  and nothing of what it printed besides, which ``pods/log`` still shows.
"""

from __future__ import annotations

import shlex

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

ANSWER = "ANSWER-HANDED-OVER: the fix is in place."
NOISE = "TRANSCRIPT-ON-STDERR"


def _speaker_command() -> list[str]:
    # The runner under the agent's Python: the image's own agentchain, in its container.
    script = (
        "import os, sys; "
        "from agentchain.runtimes.inpod import runner; "
        f"print({NOISE!r}, file=sys.stderr, flush=True); "
        f"runner.hand_over(os.environ, {ANSWER!r}); print({ANSWER!r})"
    )
    return ["sh", "-c", f"{shlex.quote(chaining.agent_python())} -c {shlex.quote(script)}"]


def test_a_handed_over_answer_is_the_output_without_the_transcript(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    speaker = chaining.agent("speaker", next_=chaining.step("listener"))
    speaker["spec"]["command"] = _speaker_command()
    chaining.apply(info, namespace, speaker, chaining.agent("listener", "--no-context"))
    chaining.apply(info, namespace, chaining.root_job("speak", "speaker"))
    first, second = chaining.wait_chain(info, namespace, "speak", 2)
    assert first["status"]["phase"] == "Succeeded", first["status"]
    assert first["status"]["result"] == ANSWER  # Not the log, which has both.
    assert NOISE in chaining.output_of(info, namespace, first)
    prompt = chaining.prompt_of(info, namespace, second)
    assert ANSWER in prompt and NOISE not in prompt
