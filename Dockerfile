# syntax=docker/dockerfile:1
#
# One image for every role: `agentchain run` (the default) is the operator with its
# webhook and job API; agent pods override the command (e.g. `agentchain demo-agent`).
#
# Build stages so the final image has no build tooling and no source tree: `deps`
# installs the package's dependencies and `builder` the package itself (`pip install`
# of the project, as CI runs it), each into a prefix that is copied over whole.
# The stages and the final image are ordered so that a change to the Python code alone
# reuses every layer but the package's own install and the last COPY: the dependencies'
# layer depends on pyproject.toml only, and the final stage's configuration comes
# before its copies (COPY writes files as root whatever USER says).
# The final image runs as a numeric non-root user and never writes to its root
# filesystem (no bytecode caches; HOME is /tmp, an emptyDir in the Helm chart), so
# `readOnlyRootFilesystem: true` and `runAsNonRoot: true` both hold.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > requirements.txt \
 && pip install --prefix=/install --requirement requirements.txt

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Metadata first: the README is part of the package metadata (pyproject's `readme`).
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip install --prefix=/install --no-deps .

FROM ${PYTHON_IMAGE}
ARG UID=10001
# git for `agentchain workspace` (the chain's checkout, report and publish).
RUN apt-get update \
 && apt-get install --yes --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
RUN groupadd --system --gid "${UID}" agentchain \
 && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin agentchain
USER 10001:10001
WORKDIR /tmp
# Webhook, job API, /healthz, /readyz and /metrics (AGENTCHAIN_LISTEN_PORT).
EXPOSE 8080
ENTRYPOINT ["agentchain"]
CMD ["run"]
COPY --from=deps /install /usr/local
COPY --from=builder /install /usr/local
