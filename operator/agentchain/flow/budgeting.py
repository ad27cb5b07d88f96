"""Chain budgets in the engine: count launches, stop a chain past its budget.

The chain's budget is its first agent's ``budget``; any other agent's ``budget`` bounds
that agent's own jobs in the chain (``flow/rules/budgets.py``).  Checked:

* at every launch (``gating.held``): the attempt is counted and the chain's start set;
  over budget, the job ends ``Cancelled`` (reason ``BudgetExceeded``) without running
  and the chain stop is recorded, so nothing more of it starts;
* at each usage report (``web/jobapi/stoproutes.py``) and at each resync of a running job (wall
  time): over budget, the chain is asked to stop (``stoprequests``, by ``budget``), so
  its running job is terminated like any stopped job and ends ``BudgetExceeded``.
"""

from __future__ import annotations

import time

from agentchain import models
from agentchain.core import statuswriting
from agentchain.core.hopstate import Ended, Hop, typed
from agentchain.core.rules import provenance
from agentchain.core.rules.outcomes import is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow import stoprequests
from agentchain.flow.rules import budgets, stoprules
from agentchain.flow.stoprecords import StopStore
from agentchain.flow.usage import Usage, UsageStore
from agentchain.kube import resources
from agentchain.models.aiagent import AiAgent, Budget
from agentchain.store import sealing

Obj = statuswriting.Obj


async def _budget(rt: Runtime, namespace: str, trigger: str) -> Budget | None:
    agent = await rt.agents.by_trigger(namespace, trigger)
    return agent.spec.budget if isinstance(agent, AiAgent) else None


async def counted_in(rt: Runtime, obj: Obj) -> tuple[str, str]:
    """The chain whose budget job ``obj`` counts against, and that chain's first agent.

    A follow-up round on a chain's pull request (its sealed event ``continues`` that
    chain) counts against the chain it continues, so rounds cannot outspend the budget
    the first chain had; any other job against its own chain."""
    position = statuswriting.position(obj, rt.operator_keys)
    event = provenance.trusted_event(
        statuswriting.parse(obj).spec.event, sealing.vouched(rt.operator_keys, obj)
    )
    continued = event.continues if event is not None else None
    if continued and continued != position.chain_id:
        record = await rt.chains.get(obj["metadata"]["namespace"], continued)
        if record is not None and record.hops:
            return continued, str(record.hops[0].get("agent") or position.path[0])
    return position.chain_id, position.path[0]


async def budget_of(rt: Runtime, obj: Obj) -> Budget | None:
    """The budget of the chain ``obj`` counts against: its first agent's."""
    _, first = await counted_in(rt, obj)
    return await _budget(rt, obj["metadata"]["namespace"], first)


def agent_of(obj: Obj) -> str:
    """The trigger name of the job's own agent."""
    return str((obj.get("spec") or {}).get("agentRole", ""))


async def limits_of(rt: Runtime, obj: Obj, usage: Usage) -> list[budgets.Limit]:
    """The budgets the job ``obj`` is held to, over ``usage``: its chain's and its agent's."""
    path = statuswriting.position(obj, rt.operator_keys).path
    _, first_agent = await counted_in(rt, obj)
    chain_budget = await _budget(rt, obj["metadata"]["namespace"], first_agent)
    first = path[-1] == first_agent
    own = None if first else await _budget(rt, obj["metadata"]["namespace"], path[-1])
    return budgets.limits(chain_budget, usage.chain, path[-1], first, own, usage.agent)


async def any_budget(rt: Runtime, obj: Obj) -> bool:
    """Whether the chain or the job's own agent has a budget (else nothing is counted)."""
    found = await limits_of(rt, obj, Usage(budgets.ChainUsage(), budgets.ChainUsage()))
    return bool(found)


async def at_launch(hop: Hop, init: Obj, attempt: int) -> Ended | None:
    """Count the launch of ``attempt``; the job's end instead when the chain is over."""
    if not await any_budget(hop.rt, hop.obj):
        return None
    chain = str(init.get("chainId") or hop.job.status.chain_id)
    counted, _ = await counted_in(hop.rt, hop.obj)
    now = time.time()
    usage = await UsageStore(hop.rt.redis).launched(
        hop.namespace, counted, hop.name, attempt, now, agent_of(hop.obj)
    )
    why = budgets.breached(await limits_of(hop.rt, hop.obj, usage), now)
    if why is None:
        return None
    await StopStore(hop.rt.redis).stop_chain(hop.namespace, chain, stoprules.BY_BUDGET, why)
    ending = stoprules.ending(stoprules.StopRequest(by=stoprules.BY_BUDGET, reason=why))
    fields = {**init, "stoppedBy": stoprules.BY_BUDGET}
    return Ended("Cancelled", ending.reason, ending.message, typed(fields))


async def stop_chain(rt: Runtime, namespace: str, chain: str, why: str) -> list[str]:
    """Ask every live job of the chain to stop, by the budget."""
    selector = f"{models.CHAIN_ID}={chain}"
    jobs, _ = await resources.list_objects(namespace, resources.AGENTJOBS, label_selector=selector)
    request = stoprules.StopRequest(by=stoprules.BY_BUDGET, reason=why)
    return await stoprequests.request_chain_stop(rt, namespace, chain, jobs, request)


async def check_running(rt: Runtime, obj: Obj) -> bool:
    """The resync's look at a job: True when its chain was over budget (now stopping)."""
    job = statuswriting.parse(obj)
    if is_terminal(job.status) or not job.status.job_name or job.status.chain_id is None:
        return False
    if not await any_budget(rt, obj):
        return False
    namespace = obj["metadata"]["namespace"]
    counted, _ = await counted_in(rt, obj)
    usage = await UsageStore(rt.redis).get(namespace, counted, agent_of(obj))
    found = await limits_of(rt, obj, usage)
    if all(limit.budget.max_chain_seconds is None for limit in found):
        return False
    why = budgets.breached(found, time.time())
    if why is None:
        return False
    await stop_chain(rt, namespace, job.status.chain_id, why)
    return True
