"""A Redis image for the chart's bundled Redis on the real node, built with no registry.

The chart runs ``redis:7.4-alpine`` with ``args: [sh, -c, <script>]`` (the script hashes
the password with ``sha256sum``, writes an ACL file and execs ``redis-server``; the
readiness probe runs ``redis-cli``). No registry is reachable here, so this image holds
what those commands need and nothing else: Debian's ``redis-server`` and ``redis-cli``
(package redis-server, which the unit tests use anyway) with the shared libraries
``ldd`` finds for them and the dynamic loader, and static busybox for ``sh``, ``cat``,
``printf``, ``sha256sum``, ``cut`` and ``grep``. Its entry point is empty, so the
chart's ``args`` are the command, as the official image's entry point runs them.

It is Redis 7.0 (Debian 12), not 7.4: the chart uses nothing newer than ACL files and
``noeviction``. Written and cached like the other node images (``realnode_images``), by
a digest of the files it holds.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from e2e.controlplane import realnode_images as images
from e2e.controlplane.realnode_images import File

REDIS_BINARIES = (Path("/usr/bin/redis-server"), Path("/usr/bin/redis-cli"))
APPLETS = ("sh", "cat", "printf", "sha256sum", "cut", "grep", "echo", "ls", "id")
# "libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x...)" or the loader's own line.
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def shared_libraries(binary: Path) -> list[str]:
    """The absolute paths ``ldd`` resolves for ``binary``, the loader included."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    return sorted({match.group(1) for match in map(_LDD_PATH.search, out.splitlines()) if match})


def redis_image() -> images.Image:
    """The image, cached by its content; raises ImageError when redis-server is missing."""
    missing = [str(p) for p in (*REDIS_BINARIES, images.BUSYBOX) if not p.exists()]
    if missing:
        raise images.ImageError(
            f"{', '.join(missing)} missing: apt-get install redis-server busybox-static"
        )
    files = [File("bin/busybox", images.BUSYBOX.read_bytes(), 0o755)]
    files += [File(f"bin/{applet}", link="busybox") for applet in APPLETS]
    libraries: set[str] = set()
    for binary in REDIS_BINARIES:
        # redis-server is a link to redis-check-rdb, which picks its mode by argv[0]:
        # the image holds the file under the server's name.
        files.append(File(f"bin/{binary.name}", binary.resolve().read_bytes(), 0o755))
        libraries.update(shared_libraries(binary))
    # Under the path the binaries ask for, the file's content (links resolved).
    files += [
        File(path.lstrip("/"), Path(path).resolve().read_bytes(), 0o755)
        for path in sorted(libraries)
    ]
    files += [File("etc/passwd", b"root:x:0:0:root:/:/bin/sh\nredis:x:999:999::/data:/bin/sh\n")]
    files += [File("etc/group", b"root:x:0:\nredis:x:999:\n")]
    inputs = b"".join(f.data for f in files) + json.dumps([f.path for f in files]).encode()
    return images._cached("redis", inputs, files, [])
