# syntax=docker/dockerfile:1
#
# One image for every role: `agentchain run` (the default) is the operator with its
# webhook and job API; agent pods override the command (e.g. `agentchain demo-agent`).
#
# Two stages so the final image has no build tooling and no source tree: the builder
# runs the same `pip install .` CI runs, into a prefix that is copied over whole.
# The final image runs as a numeric non-root user and never writes to its root
# filesystem (no bytecode caches; HOME is /tmp, an emptyDir in the Helm chart), so
# `readOnlyRootFilesystem: true` and `runAsNonRoot: true` both hold.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Metadata first: the README is part of the package metadata (pyproject's `readme`).
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip install --prefix=/install .

FROM ${PYTHON_IMAGE}
ARG UID=10001
# git for `agentchain workspace` (issue 18: the chain's checkout, report and publish).
RUN apt-get update \
 && apt-get install --yes --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
RUN groupadd --system --gid "${UID}" agentchain \
 && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin agentchain
COPY --from=builder /install /usr/local
USER 10001:10001
WORKDIR /tmp
# Webhook, job API, /healthz, /readyz and /metrics (AGENTCHAIN_LISTEN_PORT).
EXPOSE 8080
ENTRYPOINT ["agentchain"]
CMD ["run"]
