"""Pydantic models: the API of agentchain and the source of its CRDs.

Like kubebuilder's ``api/<version>/*_types.go``: spec and status shapes only,
no behaviour beyond trivial accessors.
"""

GROUP = "labrats.work"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Annotation and label keys that carry chain metadata (SPEC §2).
CHAIN_ID = f"{GROUP}/chain-id"
CHAIN_DEPTH = f"{GROUP}/chain-depth"
CHAIN_PATH = f"{GROUP}/chain-path"
PARENT_JOB = f"{GROUP}/parent-job"
AGENT_ROLE = f"{GROUP}/agent"
AGENTJOB_LABEL = f"{GROUP}/agentjob"
# On batch Jobs and their pods: which attempt (1-based) of the AgentJob they run.
ATTEMPT_LABEL = f"{GROUP}/attempt"
MANAGED_BY = "app.kubernetes.io/managed-by"
# On an AgentJob of a GitHub issue or pull request: a digest of its repository and number
# (``naming.issue_label``), so a comment command lists that issue's jobs by label.
GITHUB_ISSUE = f"{GROUP}/github-issue"
# On a child AgentJob that records a decision and never runs: "skipped" or
# "refused:<reason>", and the decision's message.
DISPOSITION = f"{GROUP}/disposition"
DISPOSITION_MESSAGE = f"{GROUP}/disposition-message"
# The operator's seals over what an AgentJob claims that grants something
# (``core.rules.provenance``): its place in a chain, and its GitHub event.
SEAL = f"{GROUP}/seal"
EVENT_SEAL = f"{GROUP}/event-seal"
# On a running AgentJob: the last progress note its agent sent (``PUT .../progress``),
# shown, escaped, on its chain's GitHub comment.
PROGRESS_NOTE = f"{GROUP}/progress-note"
# On a reviewer's AgentJob: the review its agent sent (``PUT .../review``), sealed by the
# operator for that job (its namespace, name and uid), posted when the job succeeds.
REVIEW = f"{GROUP}/review"
CREATED_NS = f"{GROUP}/created-ns"
"""On an AgentJob the operator made: when it asked for it, in Unix nanoseconds by its
own clock (the API server's ``creationTimestamp`` is to the second); its span starts
there (``traces/rules/spans.created_ns``)."""
RETRY_OF = f"{GROUP}/retry-of"
"""On an AgentJob a ``/agentchain retry`` comment created: the failed job it runs again."""
CONTINUES = f"{GROUP}/continues"
"""On a follow-up round's root AgentJob: the id of the chain whose pull request it works on
(the same value its sealed event carries as ``continues``)."""
