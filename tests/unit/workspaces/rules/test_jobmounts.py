"""A chain's workspace on the operator's side (``agentchain.workspaces.rules.jobmounts``, issue 18).

Aspects covered:
- resolution: the repository (declared, else the event's; owner/name under the git base
  URL, a full URL as is), the ref (declared; a pull request's head; none for an issue),
  the default branch ``agentchain/<chain id>``, keepFor in seconds; no repository at all
  is a NoWorkspace with a reason; the record round-trips; a follow-up round of a pull
  request its chain was started on checks out and publishes that pull request's head
  branch (only a round's event moves it);
- a record read back is checked: one resolve made passes; one about another chain,
  whose GitHub repository is cloned from another host, whose values are not in the
  schema's shape (branch, ref, credentials Secret, repository) or of the wrong type is
  refused with the reason;
- names: the claim and the publish Job are DNS labels derived from the chain id alone;
- the claim: size, class, owner (the root AgentJob), chain labels;
- the pod layout: prepare and agent as init containers, the report as the one
  container, every container's mounts (read-only for a readOnly agent);
- credentials, exhaustively over (GitHub or not) by (credentialsSecret or not) by
  (contents: none, read, write): the clone credential reaches ``workspace-prepare``
  only; the agent gets ``AGENT_GIT_TOKEN`` exactly for ``contents: write``; the report
  never gets any; the agent's prompt volume still carries the prompt alone;
- the publish Job: its one container has the push credential and the volume;
- a step's publish Job (``publishAfterStep``): its name is a DNS label derived from the
  chain and the step (one per step, never the chain's final one's, within 63 characters
  for the longest chain id), recognised as that step's and no other's; its body is the
  final one's under that name; it is made exactly when the agent asks, the job
  succeeded (not Skipped nor Failed) and the chain's workspace has ``publish: true``;
- a private CA (``workspace_ca_configmap``): mounted into exactly the containers that talk
  to the git host (prepare, publish, the agent for its own git), named to git and to the
  workspace commands, optional in the pod; nothing of it without the setting.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agentchain.core.rules import naming
from agentchain.hop.rules import jobspec
from agentchain.hop.rules.jobspec import JobInputs
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec, Workspace
from agentchain.settings import Settings
from agentchain.workspaces.rules import jobmounts

SETTINGS = Settings(api_url="http://agentchain.test:8080", workspace_image="operator:1")
SECRET = "fix-1-0123456789abcdef"
GIT = "https://git.example"
ISSUE = JobEvent(source="github", repository="octo/app", subject="issue", number=7)
PULL = JobEvent(
    source="github", repository="octo/app", subject="pull_request", number=8, head_sha="a" * 40
)


def _chain(**over: Any) -> jobmounts.ChainWorkspace:
    declared = Workspace.model_validate(over)
    resolved = jobmounts.resolve(declared, ISSUE, "c0ffee", GIT)
    assert isinstance(resolved, jobmounts.ChainWorkspace)
    return resolved


def test_a_record_resolve_made_is_sound() -> None:
    for chain in (
        _chain(),
        _chain(repository="https://other.example/x.git", credentialsSecret="s"),
    ):
        assert jobmounts.checked_record(chain.to_record(), "c0ffee", GIT) == chain


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"chain_id": "c1"}, "about another chain"),
        ({"claim_name": "agentchain-ws-c1"}, "about another chain"),
        ({"repository": "https://evil.example/octo/app.git"}, "not its GitHub repository's"),
        ({"github": "octo/app/../x"}, "not owner/name"),
        ({"github": None, "repository": "file:///etc"}, "not an https:// URL"),
        ({"branch": "-f"}, "not a branch name"),
        ({"branch": ""}, "not a branch name"),
        ({"ref": "--upload-pack=x"}, "not a ref"),
        ({"credentials_secret": "Other_Secret"}, "not a Secret name"),
        ({"publish": "yes"}, "publish is missing or of the wrong type"),
        ({"repository": None}, "repository is missing or of the wrong type"),
    ],
)
def test_a_record_read_back_is_refused_unless_sound(change: dict[str, Any], reason: str) -> None:
    record = {**_chain().to_record(), **change}
    refused = jobmounts.checked_record(record, "c0ffee", GIT)
    assert isinstance(refused, jobmounts.NoWorkspace) and reason in refused.reason


def test_resolve_defaults_to_the_events_repository_and_default_branch() -> None:
    chain = _chain()
    assert chain.repository == "https://git.example/octo/app.git"
    assert chain.github == "octo/app"
    assert chain.ref is None
    assert chain.branch == "agentchain/c0ffee"
    assert chain.claim_name == "agentchain-ws-c0ffee"
    assert (chain.size, chain.publish, chain.keep_for_seconds) == ("1Gi", False, 0)


def test_resolve_a_pull_request_checks_out_its_head() -> None:
    resolved = jobmounts.resolve(Workspace(), PULL, "c0ffee", GIT)
    assert isinstance(resolved, jobmounts.ChainWorkspace)
    assert resolved.ref == "a" * 40
    no_sha = PULL.model_copy(update={"head_sha": None})
    assert jobmounts.default_ref(no_sha) == "refs/pull/8/head"


def test_a_round_of_a_pull_request_its_chain_was_started_on_works_on_its_head_branch() -> None:
    rounds = {"continues": "c0", "round": 1, "head_ref": "greeting", "head_repository": "octo/app"}
    event = PULL.model_copy(update=rounds)
    resolved = jobmounts.resolve(Workspace(publish=True), event, "c0ffee", GIT)
    assert isinstance(resolved, jobmounts.ChainWorkspace)
    assert (resolved.ref, resolved.branch, resolved.publish) == ("greeting", "greeting", True)
    # Only a round's (sealed) event moves the branch: a chain's own stays its own.
    first = PULL.model_copy(update={"head_ref": "greeting"})
    resolved = jobmounts.resolve(Workspace(publish=True), first, "c0ffee", GIT)
    assert isinstance(resolved, jobmounts.ChainWorkspace)
    assert resolved.branch == "agentchain/c0ffee"


def test_resolve_declared_fields_win() -> None:
    chain = _chain(
        repository="https://git.other/x/y.git",
        ref="main",
        size="5Gi",
        storageClassName="fast",
        publish=True,
        branch="feature/x",
        keepFor="1h30m",
        credentialsSecret="git-cred",
    )
    assert (chain.repository, chain.github, chain.ref) == (
        "https://git.other/x/y.git",
        None,
        "main",
    )
    assert (chain.size, chain.storage_class_name, chain.branch) == ("5Gi", "fast", "feature/x")
    assert chain.keep_for_seconds == 5400
    assert chain.credentials_secret == "git-cred"
    assert jobmounts.ChainWorkspace.from_record(chain.to_record()) == chain


def test_resolve_without_any_repository_says_why() -> None:
    found = jobmounts.resolve(Workspace(), JobEvent(source="manual"), "c0ffee", GIT)
    assert isinstance(found, jobmounts.NoWorkspace)
    assert "names no repository" in found.reason
    assert isinstance(jobmounts.resolve(Workspace(), None, "c", GIT), jobmounts.NoWorkspace)


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d1h", 90000)]
)
def test_durations(text: str, seconds: int) -> None:
    assert jobmounts.duration_seconds(text) == seconds


def test_names_are_labels_derived_from_the_chain_id() -> None:
    long_id = "x" * 60
    for name in (jobmounts.claim_name(long_id), jobmounts.publish_job_name(long_id)):
        assert naming.is_dns_label(name)
    assert jobmounts.claim_name("abc") == jobmounts.claim_name("abc") != jobmounts.claim_name("abd")
    assert jobmounts.publish_job_name("abc") == "agentchain-publish-abc"


def test_claim_is_owned_by_the_root_and_labelled_with_the_chain() -> None:
    owner = {"kind": "AgentJob", "name": "root", "uid": "u1", "controller": True}
    body = jobmounts.claim_body("team-a", _chain(size="2Gi", storageClassName="local"), owner)
    assert body["metadata"]["name"] == "agentchain-ws-c0ffee"
    assert body["metadata"]["ownerReferences"] == [owner]
    assert body["metadata"]["labels"][jobmounts.WORKSPACE_LABEL] == "c0ffee"
    assert body["metadata"]["labels"]["labrats.work/chain-id"] == "c0ffee"
    assert body["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "local",
    }


def _pod(
    chain: jobmounts.ChainWorkspace, agent: dict[str, Any], settings: Settings = SETTINGS
) -> dict[str, Any]:
    spec = AiAgentSpec.model_validate({"triggerName": "coder", **agent})
    inputs = JobInputs(
        agentjob_name="fix-1",
        job_name="fix-1",
        namespace="team-a",
        agent=spec,
        chain_id="c0ffee",
        secret_name=SECRET,
        labels={},
        annotations={},
        workspace=jobmounts.mounting(chain, spec),
    )
    pod: dict[str, Any] = jobspec.build_job(inputs, settings)["spec"]["template"]["spec"]
    return pod


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


def test_pod_layout_runs_the_agent_between_prepare_and_report() -> None:
    pod = _pod(_chain(), {})
    assert [c["name"] for c in pod["initContainers"]] == ["workspace-prepare", "agent"]
    assert [c["name"] for c in pod["containers"]] == ["workspace-report"]
    prepare, agent, report = (
        _containers(pod)[n] for n in ("workspace-prepare", "agent", "workspace-report")
    )
    assert prepare["image"] == report["image"] == "operator:1"
    assert prepare["command"] == [
        "agentchain", "workspace", "prepare", "--repository", "https://git.example/octo/app.git",
        "--branch", "agentchain/c0ffee",
    ]  # fmt: skip
    assert pod["securityContext"]["fsGroup"] == jobmounts.FS_GROUP
    assert report["command"] == ["agentchain", "workspace", "report"]
    workspace = {"name": jobmounts.WORKSPACE_VOLUME, "mountPath": "/workspace", "readOnly": False}
    assert workspace in agent["volumeMounts"]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["AGENT_WORKSPACE"] == "/workspace"
    assert env["AGENT_WORKSPACE_REPO"] == "/workspace/repo"
    claim = {
        "name": jobmounts.WORKSPACE_VOLUME,
        "persistentVolumeClaim": {"claimName": "agentchain-ws-c0ffee"},
    }
    assert claim in pod["volumes"]
    assert jobspec.workspace_of({"spec": {"template": {"spec": pod}}}) == "agentchain-ws-c0ffee"


def test_a_ref_is_passed_to_prepare() -> None:
    pod = _pod(_chain(ref="v1.2"), {})
    assert _containers(pod)["workspace-prepare"]["command"][-2:] == ["--ref", "v1.2"]
    own = _pod(_chain(), {"podSecurityContext": {"fsGroup": 2000}})
    assert own["securityContext"]["fsGroup"] == 2000


def test_read_only_agent_mounts_the_workspace_read_only() -> None:
    pod = _pod(_chain(), {"workspace": {"readOnly": True}})
    mounts = _containers(pod)["agent"]["volumeMounts"]
    assert {
        "name": jobmounts.WORKSPACE_VOLUME,
        "mountPath": "/workspace",
        "readOnly": True,
    } in mounts
    # The tools still write: prepare clones, report refreshes git's index.
    assert _containers(pod)["workspace-prepare"]["volumeMounts"][0] == {
        "name": jobmounts.WORKSPACE_VOLUME, "mountPath": "/workspace"
    }  # fmt: skip


def _credentials(container: dict[str, Any], pod: dict[str, Any]) -> set[str]:
    """Every Secret reference (volume or env) a container can read, as secret/key."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    found: set[str] = set()
    for mount in container.get("volumeMounts") or []:
        secret = volumes[mount["name"]].get("secret")
        if secret is not None:
            found |= {f"{secret['secretName']}/{item['key']}" for item in secret["items"]}
    for env in container.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
        if ref is not None:
            found.add(f"{ref['name']}/{ref['key']}")
    return found


CASES = list(itertools.product([True, False], [None, "git-cred"], [None, "read", "write"]))


@pytest.mark.parametrize(("github", "secret", "contents"), CASES)
def test_credentials_reach_exactly_the_containers_that_need_them(
    github: bool, secret: str | None, contents: str | None
) -> None:
    repository = "octo/app" if github else "https://git.other/x/y.git"
    chain = _chain(repository=repository, credentialsSecret=secret)
    agent: dict[str, Any] = {}
    if contents is not None:
        agent["github"] = {"permissions": {"contents": contents}}
    pod = _pod(chain, agent)
    containers = _containers(pod)
    own = not github and secret is not None
    clone = {f"{secret}/token"} if own else {f"{SECRET}/git-token", f"{SECRET}/git-token-file"}
    assert _credentials(containers["workspace-prepare"], pod) == clone
    assert _credentials(containers["workspace-report"], pod) == set()
    agent_reads = _credentials(containers["agent"], pod)
    base = {f"{SECRET}/prompt", f"{SECRET}/prompt-env", f"{SECRET}/token"}
    if contents is not None:
        base.add(f"{SECRET}/github-token")  # Issue 17's GITHUB_TOKEN, as declared.
    if contents == "write":
        push = f"{secret}/token" if secret and not github else f"{SECRET}/github-token"
        assert agent_reads == base | {push}
        env = {e["name"]: e.get("value") for e in containers["agent"]["env"]}
        assert env["GIT_CONFIG_COUNT"] == "2"
        assert env["GIT_CONFIG_KEY_1"] == "credential.helper"
        assert env["GIT_CONFIG_VALUE_1"] == jobmounts.GIT_HELPER.replace("$", "$$")
    else:
        assert agent_reads == base
        env = {e["name"]: e.get("value") for e in containers["agent"]["env"]}
        assert "AGENT_GIT_TOKEN" not in env
        assert env["GIT_CONFIG_COUNT"] == "1"  # safe.directory alone: no helper.
    assert env["GIT_CONFIG_KEY_0"] == "safe.directory"
    assert f"{SECRET}/git-token" not in agent_reads  # The clone token: prepare's alone.


def test_without_a_token_the_token_file_is_not_named() -> None:
    assert jobmounts.token_data("") == {}
    assert jobmounts.token_data("ghs_x") == {
        "git-token": "ghs_x",
        "git-token-file": jobmounts.GIT_TOKEN_FILE,
    }
    pod = _pod(_chain(), {})
    prepare = _containers(pod)["workspace-prepare"]
    (named,) = [e for e in prepare["env"] if e["name"] == "AGENTCHAIN_GIT_TOKEN_FILE"]
    assert named["valueFrom"]["secretKeyRef"]["optional"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == jobmounts.GIT_VOLUME)
    assert volume["secret"]["optional"] is True


def test_publish_job_carries_the_push_credential_and_the_volume() -> None:
    chain = _chain(publish=True)
    owner = {"kind": "AgentJob", "name": "root", "uid": "u1"}
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    job = jobmounts.publish_job(
        "team-a", chain, "pub-secret", owner, jobmounts.Tool("operator:1", ["agentchain"]), security
    )
    assert job["metadata"]["name"] == "agentchain-publish-c0ffee"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == [
        "agentchain", "workspace", "publish", "--repository",
        "https://git.example/octo/app.git", "--branch", "agentchain/c0ffee",
    ]  # fmt: skip
    assert _credentials(container, pod) == {"pub-secret/git-token", "pub-secret/git-token-file"}
    assert pod["automountServiceAccountToken"] is False


def test_the_publish_jobs_push_token_is_readable_by_its_non_root_user() -> None:
    # The token's Secret is mounted 0400 for root; the kubelet makes it group-readable for
    # the pod's fsGroup, which a non-root user must then be in (found on a real kubelet).
    owner = {"kind": "AgentJob", "name": "root", "uid": "u1"}
    tool = jobmounts.Tool("operator:1", ["agentchain"])
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    job = jobmounts.publish_job("team-a", _chain(publish=True), "pub-secret", owner, tool, security)
    pod = job["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == jobmounts.GIT_VOLUME)
    assert volume["secret"]["defaultMode"] == 0o400
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["fsGroup"] == jobmounts.FS_GROUP
    own = ({**jobspec.DEFAULT_POD_SECURITY_CONTEXT, "fsGroup": 2000}, security[1])
    job = jobmounts.publish_job("team-a", _chain(publish=True), "pub-secret", owner, tool, own)
    assert job["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 2000


def _ca_of(container: dict[str, Any]) -> tuple[bool, str | None, str | None]:
    """(mounts the CA, SSL_CERT_FILE, git's http.sslCAInfo) of a container."""
    mounted = any(m["name"] == jobmounts.CA_VOLUME for m in container.get("volumeMounts") or [])
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    keys = [k for k, v in env.items() if k.startswith("GIT_CONFIG_KEY_") and v == "http.sslCAInfo"]
    info = env[keys[0].replace("KEY", "VALUE")] if keys else None
    return mounted, env.get("SSL_CERT_FILE"), info


@pytest.mark.parametrize("contents", [None, "write"])
def test_a_private_ca_reaches_the_containers_that_talk_to_the_git_host(
    contents: str | None,
) -> None:
    settings = SETTINGS.model_copy(update={"workspace_ca_configmap": "corp-ca"})
    agent: dict[str, Any] = {}
    if contents is not None:
        agent["github"] = {"permissions": {"contents": contents}}
    pod = _pod(_chain(), agent, settings)
    (volume,) = [v for v in pod["volumes"] if v["name"] == jobmounts.CA_VOLUME]
    assert volume["configMap"] == {
        "name": "corp-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
        "optional": True,
        "defaultMode": 0o444,
    }
    containers = _containers(pod)
    assert _ca_of(containers["workspace-prepare"]) == (True, jobmounts.CA_FILE, None)
    assert _ca_of(containers["agent"]) == (True, None, jobmounts.CA_FILE)
    assert _ca_of(containers["workspace-report"]) == (False, None, None)  # No network.
    env = {e["name"]: e.get("value") for e in containers["agent"]["env"]}
    assert env["GIT_CONFIG_COUNT"] == ("3" if contents == "write" else "2")
    plain = _pod(_chain(), agent)
    assert all(v["name"] != jobmounts.CA_VOLUME for v in plain["volumes"])
    assert all(_ca_of(c) == (False, None, None) for c in _containers(plain).values())


def test_a_private_ca_reaches_the_publish_job() -> None:
    owner = {"kind": "AgentJob", "name": "root", "uid": "u1"}
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    tool = jobmounts.Tool("operator:1", ["agentchain"], "corp-ca")
    job = jobmounts.publish_job("team-a", _chain(publish=True), "pub-secret", owner, tool, security)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert _ca_of(container) == (True, jobmounts.CA_FILE, None)
    assert [v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v] == ["corp-ca"]


def test_a_steps_publish_job_is_named_from_the_chain_and_the_step() -> None:
    name = jobmounts.step_publish_job_name("c0ffee", "developer-0123456789ab")
    assert name.startswith("agentchain-publish-c0ffee-") and naming.is_dns_label(name)
    assert name == jobmounts.step_publish_job_name("c0ffee", "developer-0123456789ab")
    others = {
        jobmounts.publish_job_name("c0ffee"),
        jobmounts.step_publish_job_name("c0ffee", "reviewer-0123456789ab"),
        jobmounts.step_publish_job_name("c0ffef", "developer-0123456789ab"),
    }
    assert name not in others and len(others) == 3
    longest = "f" * naming.MAX_CHAIN_ID_LENGTH
    for step in ("a", "x" * 253):
        long_name = jobmounts.step_publish_job_name(longest, step)
        assert naming.is_dns_label(long_name) and long_name.startswith("agentchain-publish-fff")
    assert jobmounts.is_step_publish(name, "c0ffee", "developer-0123456789ab")
    assert not jobmounts.is_step_publish(name, "c0ffee", "reviewer-0123456789ab")
    assert not jobmounts.is_step_publish(
        jobmounts.publish_job_name("c0ffee"), "c0ffee", "developer"
    )


def test_a_steps_publish_job_is_the_final_ones_under_its_own_name() -> None:
    chain = _chain(publish=True)
    owner = {"kind": "AgentJob", "name": "dev", "uid": "u2"}
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    tool = jobmounts.Tool("operator:1", ["agentchain"])
    final = jobmounts.publish_job("team-a", chain, "pub-secret", owner, tool, security)
    name = jobmounts.step_publish_job_name(chain.chain_id, "dev")
    step = jobmounts.publish_job("team-a", chain, "pub-secret", owner, tool, security, name)
    assert step["metadata"]["name"] == name
    assert {**step, "metadata": {**step["metadata"], "name": final["metadata"]["name"]}} == final
    assert step["metadata"]["labels"][jobmounts.WORKSPACE_LABEL] == "c0ffee"


@pytest.mark.parametrize(
    ("publish", "after_step", "phase", "expected"),
    [
        (True, True, "Succeeded", True),
        (False, True, "Succeeded", False),
        (True, False, "Succeeded", False),
        (True, True, "Failed", False),
        (True, True, "Skipped", False),
        (True, True, None, False),
    ],
)
def test_a_step_publishes_when_its_agent_asks_and_it_succeeded(
    publish: bool, after_step: bool, phase: str | None, expected: bool
) -> None:
    chain = _chain(publish=publish)
    declared = Workspace.model_validate({"publishAfterStep": after_step})
    assert jobmounts.publishes_after_step(chain, declared, phase) is expected
    assert jobmounts.publishes_after_step(None, declared, phase) is False
    assert jobmounts.publishes_after_step(chain, None, phase) is False


def test_a_follow_up_round_continues_the_chains_branch_in_a_volume_of_its_own() -> None:
    """A round checks out the branch the pull request shows and publishes to it again;
    its record is one ``checked_record`` accepts for the round's own chain only."""
    previous = _chain(publish=True, keepFor="1h", credentialsSecret="git-cred")
    round_ = jobmounts.continued(previous, "r0und")
    assert (round_.chain_id, round_.claim_name) == ("r0und", jobmounts.claim_name("r0und"))
    assert round_.branch == previous.branch == "agentchain/c0ffee"
    assert round_.ref == previous.branch and round_.publish
    assert (round_.repository, round_.github, round_.credentials_secret) == (
        previous.repository,
        previous.github,
        "git-cred",
    )
    assert jobmounts.checked_record(round_.to_record(), "r0und", GIT) == round_
    assert isinstance(
        jobmounts.checked_record(round_.to_record(), "c0ffee", GIT), jobmounts.NoWorkspace
    )
