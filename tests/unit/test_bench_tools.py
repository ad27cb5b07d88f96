"""The benchmarks' own arithmetic: verdicts, audit-log counting, profile summaries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench import bench_hop_latency, harness, node, profiling, starts, table
from bench.table import Row
from e2e.controlplane.cluster import ClusterInfo

from agentchain.hop.rules import jobspec
from agentchain.hop.rules.jobspec import JobInputs
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings


@pytest.mark.parametrize(
    ("row", "verdict"),
    [
        (Row("hop", 56, "ms", baseline=45, target=2.0), "PASS"),
        (Row("hop", 100, "ms", baseline=45, target=2.0), "MISS"),
        (Row("rate", 3.4, baseline=8.2, target=0.7, better="higher"), "MISS"),
        (Row("rate", 6.0, baseline=8.2, target=0.7, better="higher"), "PASS"),
        (Row("req", 6.0, baseline=2.0, target=4, compare="excess"), "PASS"),
        (Row("req", 19.1, baseline=2.0, target=4, compare="excess"), "MISS"),
        (Row("rss", 831, "MiB", target=150, compare="figure"), "MISS"),
        (Row("rss", 120, "MiB", target=150, compare="figure"), "PASS"),
        (Row("info", 5.1, "s"), "-"),
        (Row("no baseline", 5.1, target=2.0), "-"),
    ],
)
def test_verdicts(row: Row, verdict: str) -> None:
    assert row.verdict == verdict


def test_rows_go_to_the_table_file_and_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "table.jsonl"
    monkeypatch.setenv(table.TABLE_ENV, str(path))
    rows = [Row("a", 1.5, "s", baseline=1.0, target=2.0), Row("b", 3, "req")]
    for row in rows:
        table.emit(row)
    assert table.load(path) == rows
    rendered = table.render(rows)
    assert "PASS" in rendered and "ratio <= 2" in rendered


def _event(stage: str, verb: str, user: str, resource: str = "pods", **ref: str) -> str:
    event = {
        "stage": stage,
        "verb": verb,
        "user": {"username": user},
        "objectRef": {"resource": resource, **ref},
        "requestURI": "/api/v1/pods",
        "requestReceivedTimestamp": "2026-11-24T08:00:00.500000Z",
    }
    return json.dumps(event) + "\n"


def test_audit_counts_a_watch_once_and_each_request_when_complete(tmp_path: Path) -> None:
    lines = [
        _event("ResponseStarted", "watch", "op"),
        _event("ResponseComplete", "watch", "op"),  # The same watch, ended: not again.
        _event("ResponseComplete", "get", "op", subresource="log", name="p"),
        _event("ResponseStarted", "get", "op"),  # Only a watch counts when it starts.
        _event("ResponseComplete", "create", "floor", "jobs", apiGroup="batch"),
    ]
    log = tmp_path / "audit.log"
    log.write_text("".join(lines) + '{"partial":')  # A line still being written.

    info = ClusterInfo(tmp_path, "https://x", "redis://x", tmp_path, local=True, bin_dir=None)
    audit = harness.Audit(info)
    made = audit.requests(0, 2e9)
    assert [r.kind for r in made] == ["watch pods", "get pods/log", "create jobs.batch"]
    assert harness.by_kind(audit.requests(0, 2e9, {"op"})) == {"watch pods": 1, "get pods/log": 1}
    follow = audit.follow()
    assert len(next(follow)) == 3
    with log.open("a") as out:
        out.write('"x"}\n' + _event("ResponseComplete", "list", "op"))
    assert [r.kind for r in next(follow)] == ["list pods"]


def test_profile_summary_shares(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "main (agentchain/__main__.py:1);on_pod (agentchain/hop/attempts.py:60) 3\n"
        "main (agentchain/__main__.py:1);select (selectors.py:10) 1\n"
    )
    text = profiling.summary(raw)
    assert "4 samples" in text
    assert "75.0%  agentchain/hop" in text
    assert "75.0%  on_pod (agentchain/hop/attempts.py)" in text


def test_the_table_names_every_expected_figure_the_run_did_not_measure() -> None:
    rows = [Row("restart peak RSS, 5,004 jobs", 120.0, "MiB", target=150, compare="figure")]
    lines = table.missing(rows)
    assert not any("restart peak RSS, 5," in line for line in lines)
    assert any(line.startswith("  restart peak RSS, 20,") for line in lines)
    assert len(lines) == len(table.EXPECTED) - 1


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0.5, 10.0), (0.95, 19.0), (1.0, 20.0), (0.01, 1.0), (0.7, 14.0)],
)
def test_percentile_is_the_nearest_rank_of_the_sample(q: float, expected: float) -> None:
    # Shuffled: the order the samples came in is not their rank.
    values = [
        float(v) for v in (7, 20, 1, 14, 3, 19, 10, 2, 18, 5, 11, 4, 16, 6, 9, 8, 17, 12, 15, 13)
    ]
    assert harness.percentile(values, q) == expected


def test_percentile_of_a_small_sample_rounds_the_rank_up() -> None:
    # 0.7 * 10 is 7.000000000000001 in floating point: still the 7th, not the 8th.
    assert harness.percentile([float(v) for v in range(1, 11)], 0.7) == 7.0
    assert harness.percentile([5.0, 1.0, 3.0], 0.5) == 3.0
    assert harness.percentile([5.0, 1.0], 0.5) == 1.0


@pytest.mark.parametrize("q", [0.0, 1.5, -0.1])
def test_percentile_refuses_a_fraction_out_of_range(q: float) -> None:
    with pytest.raises(ValueError):
        harness.percentile([1.0, 2.0], q)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        harness.percentile([], 0.5)


def test_the_start_stamp_is_read_from_the_containers_output() -> None:
    log = "some noise\nstarted-at 1764329000.123456789\nmore\n"
    assert starts.started_at(log) == pytest.approx(1764329000.123456789)
    with pytest.raises(ValueError, match="no started-at"):
        starts.started_at("exited-at 1764329000.5\n")
    with pytest.raises(ValueError):
        starts.started_at("the agent says started-at 12.5 in a sentence\n")


def test_the_start_rows_compare_each_percentile_with_the_bare_jobs() -> None:
    # Deliveries: 1.1 .. 3.0 s; bare Jobs: 1.0 .. 1.95 s (20 each).
    delivered = [1.0 + 0.1 * i for i in range(1, 21)]
    bare = [1.0 + 0.05 * i for i in range(20)]
    p50, p95 = starts.rows(starts.Starts(delivered=delivered, bare=bare))
    assert p50.name.endswith("p50") and p95.name.endswith("p95")
    assert p50.figure == pytest.approx(2000.0) and p50.baseline == pytest.approx(1450.0)
    assert p95.figure == pytest.approx(2900.0) and p95.baseline == pytest.approx(1900.0)
    assert p50.verdict == "PASS"  # 1.38 <= 1.5
    assert p95.verdict == "PASS"  # 1.53 <= 2
    slow = starts.rows(starts.Starts(delivered=[d * 2 for d in delivered], bare=bare))
    assert [r.verdict for r in slow] == ["MISS", "MISS"]  # 2.76 and 3.05


def test_the_start_agent_and_the_bare_job_run_the_same_container() -> None:
    agent = starts.agent()
    job = starts.bare_job("start-001", "agentchain.local/e2e:abc")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == agent["spec"]["command"] == starts.start_command()
    assert container["image"] == "agentchain.local/e2e:abc"
    assert container["imagePullPolicy"] == "Never"
    assert job["spec"]["template"]["metadata"]["labels"] == {starts.START_LABEL: "start-001"}
    assert agent["spec"]["eventTriggers"] == [{"source": "github", "events": ["issues.opened"]}]


def test_a_bench_without_root_stops_at_once_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCHAIN_E2E_KUBECONFIG", raising=False)
    monkeypatch.delenv("AGENTCHAIN_E2E_USE_KUBECONFIG", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit, match="needs root"), node.bench_cluster():
        pytest.fail("no cluster starts without root")


def test_make_bench_without_root_says_why(tmp_path: Path) -> None:
    # The script checks before it builds or starts anything; as root it would start.
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: cannot run the script as another user")
    script = Path(__file__).resolve().parents[2] / "bench" / "run.sh"
    argv = ["bash", str(script), "5000"]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert "needs root" in done.stderr


def _secret_use(job: dict[str, Any], secret: str) -> tuple[int, list[int], list[bool]]:
    """How a Job's pod takes ``secret``: variables from it, files of each volume of it,
    and whether each of those volumes is mounted read-only."""
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    refs = [(e.get("valueFrom") or {}).get("secretKeyRef") or {} for e in container["env"]]
    variables = sum(ref.get("name") == secret for ref in refs)
    volumes = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
    mine = [name for name, v in volumes.items() if v["secretName"] == secret]
    mounts = {m["name"]: m.get("readOnly", False) for m in container["volumeMounts"]}
    return variables, [len(volumes[n]["items"]) for n in mine], [mounts[n] for n in mine]


def test_the_floor_with_a_secret_takes_it_as_the_operators_jobs_take_theirs() -> None:
    agent = AiAgentSpec.model_validate({"triggerName": "tp-a", "command": ["true"]})
    inputs = JobInputs(
        agentjob_name="op0-001", job_name="op0-001", namespace="tp", agent=agent,
        chain_id="c0ffee", secret_name="op0-001-s", labels={}, annotations={},
    )  # fmt: skip
    ours = jobspec.build_job(inputs, Settings(api_url="http://agentchain.test:8080"))
    floor = bench_hop_latency.baseline_job("fs0-001", 0, 0, "img", ["true"], secret="fs0-001-0")
    assert _secret_use(floor, "fs0-001-0") == _secret_use(ours, "op0-001-s") == (2, [1], [True])
    labels = floor["spec"]["template"]["metadata"]["labels"]
    assert labels[bench_hop_latency.SECRET_LABEL] == "1"  # The worker passes it on.
    secret = harness.floor_secret("fs0-001-0")
    assert set(secret["stringData"]) == {"prompt", "token"}
    bare = bench_hop_latency.baseline_job("fl0-001", 0, 0, "img", ["true"])
    assert "volumes" not in bare["spec"]["template"]["spec"]
    assert bench_hop_latency.SECRET_LABEL not in bare["metadata"]["labels"]


def test_the_start_rows_split_each_run_where_its_pod_appeared() -> None:
    timed = starts.Starts(
        delivered=[0.8, 0.9, 1.0], bare=[0.3, 0.35, 0.4],
        delivered_to_pod=[0.5, 0.5, 0.6], bare_to_pod=[0.1, 0.1, 0.1],
    )  # fmt: skip
    _, _, to_pod, node_side = starts.rows(timed)
    assert to_pod.figure == pytest.approx(500.0) and to_pod.baseline == pytest.approx(100.0)
    # The node's share: total less the part up to the pod, run by run.
    assert node_side.figure == pytest.approx(400.0) and node_side.baseline == pytest.approx(250.0)
    assert to_pod.target is None and node_side.target is None


def test_the_start_rows_against_a_job_with_a_secret_are_information() -> None:
    timed = starts.Starts(
        delivered=[0.8, 0.9, 1.0], bare=[0.3, 0.35, 0.4],
        delivered_to_pod=[0.5, 0.5, 0.6], bare_to_pod=[0.1, 0.1, 0.1],
        secret=[0.6, 0.7, 0.75], secret_to_pod=[0.2, 0.2, 0.2],
    )  # fmt: skip
    p50, p95, _, _, secret_p50, secret_p95, secret_node = starts.rows(timed)
    assert p50.baseline == pytest.approx(350.0) and p95.baseline == pytest.approx(400.0)
    assert secret_p50.figure == p50.figure and secret_p50.baseline == pytest.approx(700.0)
    assert secret_p95.baseline == pytest.approx(750.0)
    assert secret_node.figure == pytest.approx(400.0)
    assert secret_node.baseline == pytest.approx(500.0)
    assert {r.target for r in (secret_p50, secret_p95, secret_node)} == {None}


def test_the_start_bench_s_job_with_a_secret_takes_it_as_the_operator_s_pods_do() -> None:
    job = harness.with_secret(starts.bare_job("start-secret-001", "img"), "start-secret-001")
    assert _secret_use(job, "start-secret-001") == (2, [1], [True])


def test_each_hop_agent_first_sleeps_a_random_part_of_a_second() -> None:
    # Its end then falls at any phase of the kubelet's once-a-second relist, on the
    # operator's side and the floor's alike (bench_hop_latency's docstring says why).
    script = bench_hop_latency.agent_command(0.3)[2]
    assert script.startswith(bench_hop_latency.JITTER + " && ")
    assert script.endswith('echo "exited-at $(date +%s.%N)"')
    shown = bench_hop_latency.JITTER.replace("sleep", "echo", 1)
    values = [
        subprocess.run(["sh", "-c", shown], capture_output=True, text=True, check=True).stdout
        for _ in range(20)
    ]
    assert all(v.startswith("0.") and len(v.strip()) == 5 for v in values), values
    assert len(set(values)) > 1
