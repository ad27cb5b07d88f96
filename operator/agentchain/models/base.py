"""Common base for every model that is also a Kubernetes schema.

The models are the single source of truth for the CRDs (``agentchain crds``
generates ``crds/`` from them), so field names use the API's camelCase through
an alias generator while Python code keeps snake_case.  Unknown fields are
ignored on parse: the API server already prunes them, and an operator must
never crash on an object written by a newer version of itself.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_enum_values=True,
    )

    def to_api(self) -> dict[str, object]:
        """Serialise with API (camelCase) names, leaving out unset optionals."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
