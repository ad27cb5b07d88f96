"""The dashboard in a real browser, on real chains run by the session's operator (issue 19).

Aspects covered, in one browser session (Debian's chromium, headless, Selenium):
* without a session the page shows the login form and its JSON calls get 401;
* log in with the admin token; the jobs list shows, and new jobs join it live;
* a three-agent chain (each step sleeping, so it is seen running): its chain page,
  opened before the chain ends, grows to three nodes that change phase to succeeded
  without a reload (the page's own marker survives), fed by server-sent events;
* the reviewer's job page (reached by clicking its node) shows the prompt's
  ``<chain-context>`` block as such, and the result;
* a finished chain whose last step was refused (a loop) shows the refused node and
  its reason, and still draws from its Redis record once its AgentJobs are deleted;
* a job whose output holds ``<script>`` and ``"><img onerror=…>`` shows them as text:
  nothing runs, no element is made;
* logout: the login form again, and the session's calls get 401;
* the job page's live log: a running job's ``pods/log`` followed as server-sent events
  until its container ends;
* Stop on a running job's page (a second browser session): the click is the API's stop
  as the session, the page turns Cancelled by itself and drops the button, the AgentJob
  says ``stopped-by: dashboard``, and a second stop is the API's 409.

Screenshots of each page: ``e2e/artifacts/dashboard/*.png`` (docs/images/ holds copies).
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from e2e import browsing, chaining, operating
from e2e.controlplane.cluster import ClusterInfo

pytestmark = pytest.mark.e2e

STEP_SECONDS = "4"
XSS_SCRIPT = "<script>window.__xss = 1</script>"
XSS_ATTR = '"><img src=x onerror="window.__xss = 2">'
SCHEDULED_AT = "2026-11-28T03:00:00+00:00"
Obj = dict[str, Any]


def chain_of(info: ClusterInfo, namespace: str, root: str) -> str:
    found = ""

    def check() -> str:
        nonlocal found
        job = operating.get_json(info, "agentjob", root, "-n", namespace)
        found = str((job.get("status") or {}).get("chainId") or "")
        return found

    operating.wait_until(check, timeout=60, what=f"chain id of {root}")
    return found


def node_states(driver: WebDriver) -> dict[str, str]:
    """Job → state of the drawn nodes, read in one step (the page redraws the whole tree
    on each event, so element handles go stale between two reads)."""
    script = (
        "return Object.fromEntries([...document.querySelectorAll('#chain .node')]"
        ".map(n => [n.dataset.job, n.dataset.state]));"
    )
    states: dict[str, str] = driver.execute_script(script)
    return states


def text_of(driver: WebDriver, css: str) -> str:
    """The text of the first element matching ``css`` ("" if none), read in one step."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';"
    return str(driver.execute_script(script, css))


def open_page(driver: WebDriver, url: str, ready_css: str) -> None:
    driver.get(url)
    browsing.wait(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, ready_css), 30, f"{ready_css} at {url}"
    )


def log_in(driver: WebDriver, base: str, token: str) -> None:
    open_page(driver, f"{base}/ui/", "#login:not([hidden]) #token")
    assert browsing.fetch_status(driver, "/ui/api/jobs") == 401
    assert browsing.fetch_status(driver, "/ui/api/session") == 401
    browsing.screenshot(driver, "login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
    browsing.wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "table.jobs"), 30, "jobs")


def start_chains(info: ClusterInfo, namespace: str) -> None:
    sleep = ("--sleep", STEP_SECONDS)
    chaining.apply(
        info,
        namespace,
        chaining.agent("ai-triage", *sleep, next_=chaining.step("ai-developer")),
        chaining.agent("ai-developer", *sleep, next_=chaining.step("ai-reviewer")),
        chaining.agent("ai-reviewer", *sleep),
        chaining.agent("loop-a", next_=chaining.step("loop-b")),
        chaining.agent("loop-b", next_=chaining.step("loop-a")),
        chaining.agent("echo", "--no-context", "--say", XSS_SCRIPT, "--say", XSS_ATTR),
        chaining.root_job("issue-7", "ai-triage"),
        chaining.root_job("loop", "loop-a"),
        _scheduled(chaining.root_job("hostile", "echo")),
    )


def _scheduled(job: Obj) -> Obj:
    """``job`` as a scheduled run's root, its schedule text hostile (a hand-written event
    is anyone's data): the job page names the schedule and tick as text."""
    event = {"source": "schedule", "name": "schedule", "schedule": f"0 3 * * * {XSS_ATTR}"}
    job["spec"] |= {"origin": "schedule", "event": event | {"scheduledAt": SCHEDULED_AT}}
    return job


def watch_chain_grow(driver: WebDriver, url: str) -> list[dict[str, str]]:
    """Open the chain page once and record what it shows until all three succeeded."""
    open_page(driver, url, "#chain .node")
    driver.execute_script("window.__loadedOnce = true;")
    seen = [node_states(driver)]
    deadline = time.monotonic() + chaining.CHAIN_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        states = node_states(driver)
        if states != seen[-1]:
            seen.append(states)
            if len(seen) == 3:
                browsing.screenshot(driver, "chain-running")
        if len(states) == 3 and set(states.values()) == {"succeeded"}:
            if driver.execute_script(
                "return document.getElementById('chain-summary').dataset.complete === 'true'"
            ):
                break
        time.sleep(0.2)
    assert driver.execute_script("return window.__loadedOnce === true"), "the page reloaded"
    return seen


def test_the_dashboard_in_a_browser(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    if (why := browsing.missing()) is not None:
        pytest.fail(why)
    info, base = cluster_info, operator.internal_url
    with browsing.chromium() as driver:
        log_in(driver, base, operator.admin_token)
        open_page(driver, f"{base}/ui/?namespace={namespace}", "table.jobs")
        driver.execute_script("window.__listLoaded = true;")
        start_chains(info, namespace)
        browsing.wait(  # New jobs join the open list, no reload.
            driver,
            lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-job='{namespace}/issue-7']"),
            60,
            "issue-7 in the live list",
        )
        assert driver.execute_script("return window.__listLoaded === true"), "the list reloaded"
        chain_id = chain_of(info, namespace, "issue-7")
        seen = watch_chain_grow(driver, f"{base}/ui/chains/{namespace}/{chain_id}")
        assert len(seen[0]) < 3 or "succeeded" not in set(seen[0].values()) or len(seen) > 1
        final = seen[-1]
        assert len(final) == 3 and set(final.values()) == {"succeeded"}, seen
        # Seen while running, then changed in place: at least one node was not yet done.
        assert any(set(s.values()) != {"succeeded"} for s in seen[:-1]), seen
        browsing.screenshot(driver, "chain")
        check_reviewer_page(driver)
        check_refused_chain(driver, info, base, namespace)
        check_hostile_output(driver, info, base, namespace)
        check_jobs_list(driver, base, namespace)
        check_logout(driver)
        browsing.screenshot(driver, "logged-out")


def check_reviewer_page(driver: WebDriver) -> None:
    # Found and clicked in one step: a late event may redraw the tree in between.
    clicked = driver.execute_script(
        "const card = [...document.querySelectorAll('#chain .node')]"
        ".find(n => n.querySelector('.agent').textContent === 'ai-reviewer');"
        "if (!card) return false; card.querySelector('.node-name a').click(); return true;"
    )
    assert clicked, "no ai-reviewer node to click"
    browsing.wait(driver, lambda d: d.find_elements(By.ID, "chain-context"), 30, "chain context")
    context = driver.find_element(By.ID, "chain-context").text
    assert context.startswith("<chain-context>") and "Previous agent output:" in context
    assert context.rstrip().endswith("</chain-context>")
    assert "Implementation:" in context  # The developer's output, as the reviewer got it.
    result = driver.find_element(By.ID, "result").text
    assert "Review:" in result and "Verdict: approve" in result
    assert "ai-triage → ai-developer → ai-reviewer" in driver.find_element(By.TAG_NAME, "main").text
    browsing.screenshot(driver, "job")


def check_refused_chain(driver: WebDriver, info: ClusterInfo, base: str, namespace: str) -> None:
    chain_id = chain_of(info, namespace, "loop")
    chaining.wait_chain(info, namespace, "loop", 3)
    open_page(driver, f"{base}/ui/chains/{namespace}/{chain_id}", "#chain .node")
    browsing.wait(driver, lambda d: "refused" in node_states(d).values(), 30, "refused node")
    assert "LoopDetected" in text_of(driver, "#chain .node[data-state='refused']")
    assert driver.execute_script(
        "return document.getElementById('chain-summary').dataset.complete === 'true'"
    )
    assert text_of(driver, "#chain-summary").startswith("complete")
    browsing.screenshot(driver, "chain-refused")
    # Its AgentJobs deleted, the chain still draws from its record in Redis.
    selector = f"labrats.work/chain-id={chain_id}"
    info.kubectl("delete", "agentjobs", "-n", namespace, "-l", selector, "--wait=true")
    open_page(driver, f"{base}/ui/chains/{namespace}/{chain_id}", "#chain .node")
    browsing.wait(driver, lambda d: len(node_states(d)) == 3, 30, "the chain from its record")
    assert text_of(driver, "#chain").count("AgentJob deleted") == 3
    browsing.screenshot(driver, "chain-deleted")


def check_hostile_output(driver: WebDriver, info: ClusterInfo, base: str, namespace: str) -> None:
    def ended() -> Any:
        job = operating.get_json(info, "agentjob", "hostile", "-n", namespace)
        return (job.get("status") or {}).get("result")

    operating.wait_until(ended, timeout=chaining.CHAIN_TIMEOUT_SECONDS, what="hostile's result")
    open_page(driver, f"{base}/ui/jobs/{namespace}/hostile", "#result")
    result = driver.find_element(By.ID, "result").text
    assert XSS_SCRIPT in result and XSS_ATTR in result
    assert f"schedule · 0 3 * * * {XSS_ATTR}, tick" in text_of(driver, "table.detail")
    assert driver.execute_script("return window.__xss") is None, "agent output ran as script"
    assert not driver.find_elements(By.CSS_SELECTOR, "main img, main script")
    logs: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    # No script error, no CSP or Trusted Types violation; only refused requests (the
    # 401s before login, a favicon) may be logged.
    errors = [
        e
        for e in logs
        if e.get("level") == "SEVERE" and "Failed to load resource" not in str(e.get("message"))
    ]
    assert not errors, errors
    browsing.screenshot(driver, "hostile-output")


def check_jobs_list(driver: WebDriver, base: str, namespace: str) -> None:
    open_page(driver, f"{base}/ui/?namespace={namespace}", "table.jobs tbody tr")
    rows = driver.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
    assert len(rows) == 4, [r.text for r in rows]  # 3 + 1 jobs (the loop's were deleted).
    browsing.screenshot(driver, "jobs")
    agent = driver.find_element(By.CSS_SELECTOR, "#filters input[name='agent']")
    agent.send_keys("ai-reviewer")
    driver.find_element(By.CSS_SELECTOR, "#filters button").click()
    browsing.wait(
        driver,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")) == 1,
        30,
        "the list filtered by agent",
    )
    assert "agent=ai-reviewer" in driver.current_url


def check_logout(driver: WebDriver) -> None:
    driver.find_element(By.ID, "logout").click()
    browsing.wait(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#login:not([hidden])"), 30, "login"
    )
    assert browsing.fetch_status(driver, "/ui/api/session") == 401
    driver.refresh()
    browsing.wait(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#login:not([hidden])"), 30, "login"
    )


async def test_a_running_jobs_log_is_followed_until_it_ends(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    """The job page's live log: ``pods/log?follow`` through the API server, as SSE."""
    chaining.apply(
        cluster_info,
        namespace,
        chaining.agent("slow", "--no-context", "--sleep", "3", "--say", "done at last"),
        chaining.root_job("slow-1", "slow"),
    )

    def running() -> bool:
        job = operating.get_json(cluster_info, "agentjob", "slow-1", "-n", namespace)
        status = job.get("status") or {}
        return status.get("phase") == "Running" and bool(status.get("podName"))

    operating.wait_until(running, timeout=60, what="slow-1 running")
    host = operator.internal_url.removeprefix("http://")
    origin = {"Origin": operator.internal_url, "Host": host}
    jar = aiohttp.CookieJar(unsafe=True)  # The operator is at an IP address: keep its cookie.
    async with aiohttp.ClientSession(operator.internal_url, cookie_jar=jar) as http:
        login = await http.post("/ui/login", json={"token": operator.admin_token}, headers=origin)
        assert login.status == 200
        events: list[tuple[str, Any]] = []
        async with http.get(f"/ui/api/jobs/{namespace}/slow-1/log") as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            name = ""
            async for raw in stream.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((name, json.loads(line.removeprefix("data: "))))
                    if name == "end":
                        break
    assert events[0][0] == "reset" and events[-1][0] == "end"
    text = "".join(data for kind, data in events if kind == "log")
    assert "== slow report (job slow-1) ==" in text and "done at last" in text


STOP_409 = """
const done = arguments[arguments.length - 1];
fetch("/ui/api/session", {credentials: "same-origin"}).then(r => r.json()).then(s => fetch(
  arguments[0], {method: "POST", credentials: "same-origin", body: "{}",
  headers: {"Content-Type": "application/json", "X-CSRF-Token": s.csrf}}))
  .then(r => done(r.status)).catch(e => done(-1));
"""


def test_a_click_on_stop_cancels_a_running_job_live(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    """Stop on a running job's page: the API's stop, as the session; the page turns
    Cancelled by itself, the button goes, and a second stop is the API's 409."""
    if (why := browsing.missing()) is not None:
        pytest.fail(why)
    chaining.apply(
        cluster_info,
        namespace,
        chaining.agent("long", "--no-context", "--sleep", "120", "--say", "never"),
        chaining.root_job("long-1", "long"),
    )

    def job() -> dict[str, Any]:
        return operating.get_json(cluster_info, "agentjob", "long-1", "-n", namespace)

    def running() -> bool:
        status = job().get("status") or {}
        return status.get("phase") == "Running" and bool(status.get("podName"))

    operating.wait_until(running, timeout=60, what="long-1 running")
    base = operator.internal_url
    with browsing.chromium() as driver:
        log_in(driver, base, operator.admin_token)
        open_page(driver, f"{base}/ui/jobs/{namespace}/long-1", "#stop")
        assert text_of(driver, "table.detail") and "Approve" not in text_of(driver, ".actions")
        browsing.screenshot(driver, "job-running")
        driver.find_element(By.ID, "stop").click()
        cancelled = "[data-phase='cancelled']"
        browsing.wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, cancelled), 60, cancelled)
        assert not driver.find_elements(By.ID, "stop"), "an ended job still offers Stop"
        browsing.screenshot(driver, "job-stopped")
        path = f"/ui/api/jobs/{namespace}/long-1/stop"
        assert driver.execute_async_script(STOP_409, path) == 409
    annotations = job()["metadata"].get("annotations") or {}
    assert annotations.get("labrats.work/stopped-by") == "dashboard", annotations
