"""Event data kept from a GitHub delivery (``agentchain.github.rules.matching.event_from_payload``).

Aspects covered:
* issue, comment, pull request and push payloads: which title, body, URL,
  number, labels and sender association a job keeps;
* non-string and malformed fields are dropped, not crashed on;
* length caps (title 1 KiB, body 64 KiB) with a visible marker, cut on a
  character boundary; NULs removed and lone surrogates replaced;
* property: bounded text stays within its cap and is a prefix of the original.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules import matching


def payload() -> dict[str, Any]:
    return {
        "action": "opened",
        "issue": {
            "number": 12,
            "title": "Login broken",
            "body": "Steps",
            "html_url": "https://github.com/octo/app/issues/12",
            "author_association": "MEMBER",
            "labels": [],
        },
        "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
        "sender": {"login": "alice", "type": "User"},
    }


class TestEventFromPayload:
    def test_issue(self) -> None:
        body = payload()
        body["issue"]["labels"] = [{"name": n} for n in ("bug", "bug", "p1")]
        event = matching.event_from_payload("issues", body, delivery_id="d-1", hook_id="h-1")
        assert event.model_dump(exclude_none=True) == {
            "source": "github",
            "name": "issues",
            "action": "opened",
            "delivery_id": "d-1",
            "hook_id": "h-1",
            "repository": "octo/app",
            "sender": "alice",
            "sender_association": "MEMBER",
            "number": 12,
            "title": "Login broken",
            "body": "Steps",
            "url": "https://github.com/octo/app/issues/12",
            "labels": ["bug", "p1"],
            "subject": "issue",
        }

    def test_comment_body_and_association(self) -> None:
        body = (
            payload()
            | {"action": "created"}
            | {
                "comment": {
                    "body": "/fix please",
                    "author_association": "OWNER",
                    "html_url": "https://github.com/octo/app/issues/12#c1",
                }
            }
        )
        event = matching.event_from_payload("issue_comment", body, delivery_id="d", hook_id=None)
        assert (event.title, event.body) == ("Login broken", "/fix please")
        assert event.sender_association == "OWNER"
        assert event.url == "https://github.com/octo/app/issues/12#c1"

    def test_pull_request(self) -> None:
        body = {
            "action": "opened",
            "number": 7,
            "pull_request": {
                "number": 7,
                "title": "Fix",
                "body": None,
                "html_url": "u",
                "labels": [{"name": "x"}],
                "author_association": "COLLABORATOR",
            },
        }
        event = matching.event_from_payload("pull_request", body, delivery_id="d", hook_id=None)
        assert (event.number, event.title, event.body, event.url) == (7, "Fix", None, "u")
        assert event.labels == ["x"]
        assert event.repository is None

    def test_push(self) -> None:
        body = {
            "ref": "refs/heads/main",
            "compare": "https://c",
            "repository": {"full_name": "octo/app"},
            "head_commit": {"message": "Fix login\n\nDetails"},
        }
        event = matching.event_from_payload("push", body, delivery_id="d", hook_id=None)
        assert (event.action, event.title, event.body) == (
            None,
            "Fix login",
            "Fix login\n\nDetails",
        )
        assert (event.url, event.sender_association) == ("https://c", "COLLABORATOR")

    def test_non_string_fields_are_dropped(self) -> None:
        body = {
            "action": 3,
            "issue": {"title": {"x": 1}, "number": True, "labels": ["bug", {}]},
            "sender": "alice",
            "repository": ["octo/app"],
        }
        event = matching.event_from_payload("issues", body, delivery_id="d", hook_id=None)
        assert (event.action, event.title, event.number, event.sender, event.repository) == (
            None,
            None,
            None,
            None,
            None,
        )
        assert event.labels == []

    def test_long_title_and_body_are_cut_visibly(self) -> None:
        body = payload()
        body["issue"]["title"] = "t" * 5000
        body["issue"]["body"] = "é" * 40000  # 80,000 bytes of two-byte characters.
        event = matching.event_from_payload("issues", body, delivery_id="d", hook_id=None)
        assert event.title is not None and event.body is not None
        assert len(event.title.encode()) <= matching.TITLE_MAX_BYTES
        assert event.title.endswith("… [truncated: 5000 bytes in total]")
        assert len(event.body.encode()) <= matching.BODY_MAX_BYTES
        assert event.body.endswith("… [truncated: 80000 bytes in total]")
        assert event.body.startswith("é" * 1000)

    def test_nul_and_lone_surrogate(self) -> None:
        body = payload()
        body["issue"]["body"] = "a\x00b\ud800c"
        event = matching.event_from_payload("issues", body, delivery_id="d", hook_id=None)
        assert event.body == "ab?c"

    @given(text=st.text(min_size=0, max_size=1500) | st.text(alphabet="é€😀", min_size=300))
    def test_bounded_text_stays_within_cap(self, text: str) -> None:
        body = payload()
        body["issue"]["title"] = text
        bounded = matching.event_from_payload("issues", body, delivery_id="d", hook_id=None).title
        clean = text.replace("\x00", "")
        if not clean:
            assert not bounded
            return
        assert bounded is not None
        assert len(bounded.encode()) <= matching.TITLE_MAX_BYTES
        if len(clean.encode()) <= matching.TITLE_MAX_BYTES:
            assert bounded == clean
        else:
            assert clean.startswith(bounded.rsplit(" … [truncated", 1)[0])
