"""The reference agent images (``images/agent/Dockerfile``, one per runtime through its
``RUNTIME`` build argument), built with no registry and no Docker engine, cached by
their inputs, as OCI archives the real node imports.

Built exactly as the operator image is (``operator_image.build``: the
``python:3.11-slim`` stand-in, ``buildah bud --layers`` on overlay storage in a private
mount namespace, pip from the wheelhouse, an archive keyed by a digest of the
Dockerfile, its build arguments, the base and every context file), with the repository's
root as the context and the Dockerfile's own ``Dockerfile.dockerignore``. One
difference: the ``cli`` stage downloads the CLI from the npm registry itself, through
this machine's TLS-intercepting proxy, so the host's CA bundle is mounted over the
image's own for the build's ``RUN`` steps (in no layer).

The Dockerfile orders its layers so that a change to the package's Python code reuses
everything but the package's own install and the last ``COPY`` of the final stage: the
CLI (hundreds of MB) and the dependencies are separate stages, copied first; and only
the CLI's stage reads ``RUNTIME``, so the runtimes' builds share every other layer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.controlplane import operator_image, realnode_images

RUNTIMES = ("claude-code", "codex", "opencode", "gemini")
DOCKERFILE = "images/agent/Dockerfile"
# The e2e suite's own agent image (``images/e2e-agent/Dockerfile``): every agent of the
# suite runs in it on the real node.
E2E_DOCKERFILE = "images/e2e-agent/Dockerfile"
E2E_IMAGE_NAME = f"{operator_image.IMAGE_NAME}-e2e-agent"
ROOT = Path(__file__).resolve().parents[2]


def image_name(runtime: str) -> str:
    """``agentchain-<runtime>``, as the published images are named."""
    return f"{operator_image.IMAGE_NAME}-{runtime}"


def build(runtime: str, root: Path = ROOT) -> operator_image.Built:
    """The runtime's reference image (cached by its inputs)."""
    if runtime not in RUNTIMES:
        raise operator_image.BuildError(f"no reference image for runtime {runtime!r}")
    return operator_image.build(
        root, DOCKERFILE, image_name(runtime), trust_host_ca=True, archives=archive_dir(),
        build_args={"RUNTIME": runtime},
    )  # fmt: skip


def build_e2e(root: Path = ROOT) -> operator_image.Built:
    """The e2e suite's agent image (cached by its inputs), archived beside the reference
    images: an operator image build, which deletes its own older archives, leaves it."""
    return operator_image.build(root, E2E_DOCKERFILE, E2E_IMAGE_NAME, archives=archive_dir())


def archive_dir() -> Path:
    """A directory of their own: an operator image build deletes its older archives, and
    before it matched exactly its own name it took ``agentchain-*.tar`` in the image
    cache, which these archives' names (``agentchain-claude-code-<key>.tar``) match."""
    return realnode_images.cache_dir() / "agents"


def import_into(containerd_socket: Path, built: operator_image.Built) -> None:
    """Load a built image into the real node's containerd (pods use it with
    ``imagePullPolicy: Never``)."""
    image = realnode_images.Image(built.ref, built.archive)
    realnode_images.import_image(Path("ctr"), containerd_socket, image)


def main(argv: list[str]) -> int:
    """``python -m e2e.controlplane.agent_images [RUNTIME|e2e-agent...]``: every
    runtime's image when none is named; ``e2e-agent`` is the suite's own."""
    for runtime in argv[1:] or RUNTIMES:
        built = build_e2e() if runtime == "e2e-agent" else build(runtime)
        state = "cached" if built.cached else "built"
        print(f"{runtime}: {built.ref} {built.archive} ({state} in {built.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
