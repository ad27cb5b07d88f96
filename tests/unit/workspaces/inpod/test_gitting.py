"""How git is run for the workspace commands: its environment and its output.

Aspects covered:
- nothing of the caller's git environment reaches git (``GIT_DIR``, ``GIT_TRACE``,
  ``GIT_ASKPASS``, ``GIT_SSH_COMMAND``...), proxies and CA settings do; git never prompts;
- a CA named by ``SSL_CERT_FILE`` is the one git verifies the server with (Debian's git,
  libcurl-gnutls, ignores the variable itself), checked against a real TLS server;
- configuration, the credential included, goes through ``GIT_CONFIG_*`` variables,
  never the command line, and git reads it (checked with the real git);
- the token is scoped to the repository's URL and sent as Basic ``x-access-token``;
  token files are validated, and their errors name the file, not the content;
- stderr is kept to its tail; a failing command raises with it; a stream that git
  stops writing to ends at the deadline.
"""

from __future__ import annotations

import base64
import http.server
import os
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.controlplane import certs

from agentchain.workspaces.inpod import credentials, gitting


def test_the_callers_git_environment_never_reaches_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for name in ("GIT_DIR", "GIT_TRACE", "GIT_ASKPASS", "GIT_SSH_COMMAND", "GIT_CONFIG_COUNT",
                 "GIT_CONFIG_PARAMETERS", "SSH_ASKPASS", "AWS_SECRET_ACCESS_KEY"):  # fmt: skip
        monkeypatch.setenv(name, "evil")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    env = gitting.environment()
    assert env["HTTPS_PROXY"] == "http://proxy:3128"
    for name in ("GIT_DIR", "GIT_TRACE", "GIT_ASKPASS", "GIT_SSH_COMMAND", "SSH_ASKPASS",
                 "GIT_CONFIG_PARAMETERS", "AWS_SECRET_ACCESS_KEY"):  # fmt: skip
        assert name not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["GIT_CONFIG_COUNT"] == str(len(gitting.BASE_CONFIG))


def test_configuration_reaches_git_through_the_environment() -> None:
    env = gitting.environment([("http.https://h/a/b.git.extraHeader", "X-Test: 1")])
    shown = gitting.text(gitting.run(["config", "--get-urlmatch", "http.extraHeader",
                                      "https://h/a/b.git/info/refs"], env))  # fmt: skip
    assert shown == "X-Test: 1"
    other = gitting.run(["config", "--get-urlmatch", "http.extraHeader", "https://evil/a/b.git"],
                        env, check=False)  # fmt: skip
    assert other.code == 1 and other.stdout == b""
    assert gitting.text(gitting.run(["config", "protocol.allow"], env)) == "never"


def test_the_token_is_a_basic_header_scoped_to_the_repository() -> None:
    ((key, value),) = credentials.auth_config("https://github.com/a/b.git", "ghs_x")
    assert key == "http.https://github.com/a/b.git.extraHeader"
    assert value == "Authorization: Basic " + base64.b64encode(b"x-access-token:ghs_x").decode()
    assert credentials.auth_config("https://h/a.git", None) == []
    ((_, other),) = credentials.auth_config("https://h/a.git", "t", user="oauth2")
    assert base64.b64decode(other.split()[-1]) == b"oauth2:t"


@pytest.mark.parametrize(
    ("content", "ok"),
    [(b"ghs_abc\n", True), (b"  tok  \n", True), (b"", False), (b"\n", False),
     (b"two words", False), (b"a\x00b", False), (b"x" * (credentials.TOKEN_MAX_BYTES + 1), False)],
)  # fmt: skip
def test_token_files(tmp_path: Path, content: bytes, ok: bool) -> None:
    path = tmp_path / "token"
    path.write_bytes(content)
    if ok:
        assert credentials.read_token(path) == content.decode().strip()
        return
    with pytest.raises(credentials.CredentialError) as raised:
        credentials.read_token(path)
    # The file is named, its content never (it may be a token with a stray space).
    assert str(raised.value) == f"token file {path}: not a token (one line of printable ASCII)"


def test_a_missing_token_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(credentials.CredentialError, match="No such file"):
        credentials.read_token(tmp_path / "absent")


def test_a_failure_raises_with_the_tail_of_stderr(tmp_path: Path) -> None:
    with pytest.raises(gitting.GitError) as raised:
        gitting.run(["-C", str(tmp_path), "rev-parse", "HEAD"], gitting.environment())
    assert "not a git repository" in raised.value.stderr
    assert len(raised.value.stderr) <= gitting.ERROR_MAX_BYTES


def test_a_silent_stream_ends_at_the_deadline(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # git blocks reading it, writing nothing.
    started = time.monotonic()
    with pytest.raises(gitting.GitError):
        list(gitting.stream(["hash-object", str(fifo)], gitting.environment(), timeout=1))
    assert time.monotonic() - started < 10


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback (404 to everything) and the CA that signed it."""
    ca, pair = certs.serving(tmp_path / "tls", "server")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert, pair.key)
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/a/b.git", ca
    finally:
        server.shutdown()
        server.server_close()


def test_the_ca_of_ssl_cert_file_is_the_one_git_trusts(
    tls_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ca = tls_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    untrusted = gitting.run(["ls-remote", url], gitting.environment(), check=False)
    assert untrusted.code != 0 and "certificate" in untrusted.stderr
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    trusted = gitting.run(["ls-remote", url], gitting.environment(), check=False)
    # Past TLS: the server answers (501, it serves nothing), no certificate complaint.
    assert trusted.code != 0 and "certificate" not in trusted.stderr, trusted.stderr
    assert "501" in trusted.stderr or "not found" in trusted.stderr, trusted.stderr
