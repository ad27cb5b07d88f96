"""Request models of the job API: validation for the handlers, schemas for OpenAPI.

Bounds are deliberate: names follow Kubernetes (DNS labels, 63 characters),
prompts are capped well below the API server's object size limit, and unknown
body fields are refused (``extra="forbid"``) so a typo is a 422, not a silently
ignored option.  Bodies are validated strictly (``requests.validate``): a JSON string is
never taken for a number or a boolean.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from agentchain.github.rules.progress import NOTE_MAX_CHARS
from agentchain.models.aiagent import TRIGGER_NAME_PATTERN
from agentchain.store.answers import ANSWER_MAX_BYTES

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
PROMPT_MAX_CHARS = 64 * 1024
MAX_PAGE = 500
DEFAULT_PAGE = 50
MAX_WAIT_SECONDS = 300
_TEXT = 253


def _integral(value: object) -> object:
    """JSON Schema's integer: a number with no fractional part, ``1.0`` included."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


INTEGRAL = BeforeValidator(_integral)
"""On an ``int`` of a JSON body (validated strictly: no string, no boolean), after its
bounds: a bound placed after it would reach the OpenAPI document as pydantic's own
``ge``/``le`` words instead of ``minimum``/``maximum``."""
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
MAX_ATTEMPT = 1000
"""Above any attempt a job can reach (an AiAgent retries at most ten times)."""
MAX_ANSWER_SIZE = 2**53


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class JobQuery(_Strict):
    chain_id: str | None = Field(default=None, alias="chainId", max_length=_TEXT)
    agent_role: str | None = Field(default=None, alias="agentRole", max_length=63)
    status: str | None = Field(
        default=None,
        max_length=32,
        description="completed|failed|running|pending|waiting|skipped, or a phase.",
    )
    namespace: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    continue_: str | None = Field(default=None, alias="continue", max_length=2048)


class WaitQuery(_Strict):
    wait: float | None = Field(
        default=None, ge=0, le=MAX_WAIT_SECONDS, description="Seconds to wait for the job to end."
    )


class AdminJobRequest(_Strict):
    """A manual run (admin token): a root AgentJob in ``namespace``."""

    namespace: str = Field(pattern=DNS_LABEL, max_length=63)
    agent_role: str = Field(alias="agentRole", pattern=TRIGGER_NAME_PATTERN, max_length=63)
    prompt: str = Field(default="", max_length=PROMPT_MAX_CHARS)
    type: str | None = Field(default=None, max_length=63)
    name: str | None = Field(
        default=None,
        pattern=DNS_LABEL,
        max_length=63,
        description="Optional AgentJob name; repeating a name returns the existing job.",
    )
    concurrency_group: str | None = Field(
        default=None,
        alias="concurrencyGroup",
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description=(
            "Run in this concurrency group (literal), with the agent's limit and policy "
            "(limit 1, queue when the agent names none)."
        ),
    )


class DelegationRequest(_Strict):
    """A delegation (job token): the target agent and its task."""

    # The document says what _one_task enforces: a non-empty prompt or task.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [field], "properties": {field: {"type": "string", "minLength": 1}}}
                for field in ("prompt", "task")
            ]
        }
    )

    agent_role: str = Field(alias="agentRole", pattern=TRIGGER_NAME_PATTERN, max_length=63)
    prompt: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
    task: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
    type: str | None = Field(default=None, max_length=63)

    @model_validator(mode="after")
    def _one_task(self) -> DelegationRequest:
        if not (self.prompt or self.task):
            raise ValueError("a delegation needs a prompt or a task")
        return self

    @property
    def text(self) -> str:
        return self.prompt or self.task or ""


class StoreQuery(_Strict):
    tenant: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    prefix: str | None = Field(default=None, max_length=512)
    recent: int = Field(default=20, ge=1, le=1000)
    extend: bool = False


class StoreWrite(_Strict):
    value: str
    ttl_seconds: Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS), INTEGRAL] | None = Field(
        default=None,
        alias="ttlSeconds",
        description="Expiry; absent means write-and-extend with the 90-day default.",
    )
    persistent: bool = Field(default=False, description="Never expire (ignores ttlSeconds).")


class TenantQuery(_Strict):
    tenant: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")


class StopRequest(_Strict):
    """A stop (admin token): why, shown on the job (``Stopped by api: <reason>``)."""

    reason: str = Field(default="", max_length=200, description="Why; one line of text.")


class ProgressNoteRequest(_Strict):
    """A running job's progress note (job token, its own job): one line on its chain's comment."""

    note: str = Field(
        min_length=1,
        max_length=NOTE_MAX_CHARS,
        description="Plain text, shown escaped on one line; replaces the job's previous note.",
    )


class UsageReport(_Strict):
    """What an agent used since its last report (job token): added to its chain's usage.

    ``tokens`` is the total its budgets count; ``inputTokens`` and ``outputTokens`` split
    it where the agent's CLI does (they may add up to less: a CLI's total may count
    more). A report of the split alone counts their sum as its total."""

    tokens: Annotated[int, Field(ge=0, le=10**12), INTEGRAL] = 0
    cost: float = Field(default=0.0, ge=0, le=10**9, allow_inf_nan=False, strict=True)
    turns: Annotated[int, Field(ge=0, le=10**6), INTEGRAL] = Field(
        default=0, description="Agent turns since the last report (shown, not budgeted)."
    )
    input_tokens: Annotated[int, Field(ge=0, le=10**12), INTEGRAL] = Field(
        default=0,
        alias="inputTokens",
        description="Of tokens, those of the prompt (cached input included).",
    )
    output_tokens: Annotated[int, Field(ge=0, le=10**12), INTEGRAL] = Field(
        default=0,
        alias="outputTokens",
        description="Of tokens, those the model wrote (its reasoning included).",
    )

    @model_validator(mode="after")
    def _split_within_total(self) -> UsageReport:
        split = self.input_tokens + self.output_tokens
        if not self.tokens:
            self.tokens = split  # An agent that reports only the split.
        elif split > self.tokens:
            raise ValueError("inputTokens and outputTokens add up to more than tokens")
        return self


class AnswerHandover(_Strict):
    """A job's final answer (job token, its own job), handed over by its runner before
    its container exits: the attempt's output, instead of what ``pods/log`` shows."""

    answer: str = Field(
        max_length=ANSWER_MAX_BYTES,
        description=(
            f"The final answer as plain text, at most {ANSWER_MAX_BYTES} bytes as UTF-8 "
            "(413 beyond): its end when the whole was longer. Stored and shown as data."
        ),
    )
    attempt: Annotated[int, Field(ge=1, le=MAX_ATTEMPT), INTEGRAL] = Field(
        description="The attempt it is for (AGENT_ATTEMPT)."
    )
    truncated: bool = Field(
        default=False, description="Whether answer is only the end of a longer one."
    )
    size: Annotated[int, Field(ge=0, le=MAX_ANSWER_SIZE), INTEGRAL] | None = Field(
        default=None,
        description="The whole answer's size in bytes of UTF-8; required when truncated.",
    )

    @model_validator(mode="after")
    def _size_when_cut(self) -> AnswerHandover:
        if self.truncated and self.size is None:
            raise ValueError("a truncated answer says its whole size")
        if self.size is not None and self.size < len(self.answer.encode("utf-8")):
            raise ValueError("size is less than the answer sent")
        if (
            self.size is not None
            and not self.truncated
            and self.size != len(self.answer.encode("utf-8"))
        ):
            raise ValueError("size differs from the answer sent, which is not truncated")
        return self
