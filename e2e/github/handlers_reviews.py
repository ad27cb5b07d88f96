"""Pull request reviews: a pull request's changed files, its reviews, and a new review,
each with the permission GitHub asks an installation token for (``pull_requests``).

GitHub's refusals a client must expect are kept: an inline comment on a line that is
not in the diff (422 ``Line could not be resolved``), approving or requesting changes
on one's own pull request (422), and a ``REQUEST_CHANGES`` or ``COMMENT`` review
without a body (422).  ``line``/``side`` comments are served, also over several lines
(``start_line``/``start_side``: every line of the range must be a line of the diff on
that side, so it stays within one hunk, else 422 like GitHub); ``position``, the legacy
anchor, answers 422 here.  A review's
inline comments are listed too (``pulls/list-comments-for-review``), as a follow-up round
reads them.
"""

from __future__ import annotations

import re

from e2e.github import model
from e2e.github.calls import Answer, Call, handles
from e2e.github.handlers_repos import _author, _pull

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


def files_of(call: Call, pull: model.PullRequest, head: str | None = None) -> list[model.PullFile]:
    """The pull request's changed files at ``head`` (default: its branch's commit now)."""
    if pull.files is not None:
        return pull.files
    differ, resolver = call.state.differ, call.state.ref_resolver
    if differ is None:
        return []
    if head is None:
        head = (resolver(pull.repo, pull.head) if resolver else None) or pull.head_sha
    return differ(pull.repo, pull.base, head)


def anchors(patch: str | None) -> set[tuple[str, int]]:
    """(side, line) pairs of the lines a patch shows: what GitHub lets a comment name."""
    found: set[tuple[str, int]] = set()
    old = new = 0
    for text in (patch or "").split("\n"):
        hunk = _HUNK.match(text)
        if hunk:
            old, new = int(hunk.group(1)), int(hunk.group(3))
        elif text.startswith("+"):
            found.add(("RIGHT", new))
            new += 1
        elif text.startswith("-"):
            found.add(("LEFT", old))
            old += 1
        elif text.startswith(" "):
            found.update({("LEFT", old), ("RIGHT", new)})
            old, new = old + 1, new + 1
    return found


@handles("pulls/list-files")
def list_files(call: Call) -> Answer:
    pull, _ = _pull(call, "read")
    files = files_of(call, pull)
    return Answer(200, [call.render.diff_entry(f, pull) for f in call.page(files)])


@handles("pulls/list-reviews")
def list_reviews(call: Call) -> Answer:
    pull, _ = _pull(call, "read")
    found = sorted(
        (r for r in call.state.reviews.values() if (r.repo, r.number) == (pull.repo, pull.number)),
        key=lambda r: r.id,
    )
    return Answer(200, [call.render.review(r) for r in call.page(found)])


@handles("pulls/list-comments-for-review")
def list_comments_for_review(call: Call) -> Answer:
    pull, _ = _pull(call, "read")
    review = call.state.reviews.get(call.int_param("review_id"))
    if review is None or (review.repo, review.number) != (pull.repo, pull.number):
        raise model.Refused(404, "Not Found")
    comments = [call.render.review_comment(review, c) for c in call.page(review.comments)]
    return Answer(200, comments)


def _unprocessable(message: str) -> model.Refused:
    return model.Refused(422, "Unprocessable Entity", errors=[message])


@handles("pulls/create-review")
def create_review(call: Call) -> Answer:
    pull, _ = _pull(call, "write")
    body = call.body or {}
    event, text = body.get("event"), body.get("body") or ""
    author, kind, app_id = _author(call)
    if event in ("APPROVE", "REQUEST_CHANGES") and author == pull.author:
        verb = "approve" if event == "APPROVE" else "request changes on"
        raise _unprocessable(f"Can not {verb} your own pull request")
    if event in ("REQUEST_CHANGES", "COMMENT") and not text:
        raise _unprocessable(f"Body is required when using {event}")
    commit = body.get("commit_id") or pull.head_sha
    lines = {f.filename: anchors(f.patch) for f in files_of(call, pull, body.get("commit_id"))}
    comments = []
    for c in body.get("comments") or []:
        if "position" in c or "line" not in c:
            raise _unprocessable("the stand-in serves line/side comments only")
        side, start = c.get("side", "RIGHT"), c.get("start_line")
        if start is not None and (c.get("start_side", side) != side or start >= c["line"]):
            raise _unprocessable("start_line must precede line, on the same side")
        shown = lines.get(c["path"], set())
        if any((side, n) not in shown for n in range(start or c["line"], c["line"] + 1)):
            raise _unprocessable("Line could not be resolved")
        comments.append(
            model.ReviewComment(
                call.state.next_id(), c["path"], c["line"], side, c["body"], start_line=start
            )
        )
    review = model.Review(
        call.state.next_id(),
        pull.repo,
        pull.number,
        author,
        kind,
        app_id,
        _STATES.get(str(event), "PENDING"),
        text,
        commit,
        comments,
    )
    call.state.reviews[review.id] = review
    return Answer(200, call.render.review(review))


def _on_pull(call: Call, pull: model.PullRequest) -> list[tuple[model.Review, model.ReviewComment]]:
    """Every review comment of ``pull``, with its review, oldest first."""
    reviews = (
        r for r in call.state.reviews.values() if (r.repo, r.number) == (pull.repo, pull.number)
    )
    found = [(r, c) for r in reviews for c in r.comments]
    return sorted(found, key=lambda pair: pair[1].id)


@handles("pulls/list-review-comments")
def list_review_comments(call: Call) -> Answer:
    pull, _ = _pull(call, "read")
    found = _on_pull(call, pull)
    return Answer(200, [call.render.review_comment(r, c) for r, c in call.page(found)])


@handles("pulls/create-reply-for-review-comment")
def create_reply(call: Call) -> Answer:
    """A reply in the thread of a top-level review comment (GitHub refuses a reply to a
    reply: only a thread's first comment takes replies)."""
    pull, _ = _pull(call, "write")
    wanted = call.int_param("comment_id")
    parent = next(((r, c) for r, c in _on_pull(call, pull) if c.id == wanted), None)
    if parent is None:
        raise model.Refused(404, "Not Found")
    review, top = parent
    if top.in_reply_to is not None:
        raise _unprocessable("Replies to replies are not supported")
    text = (call.body or {}).get("body") or ""
    if not text:
        raise _unprocessable("Body is required")
    author, kind, app_id = _author(call)
    reply = model.ReviewComment(
        call.state.next_id(), top.path, top.line, top.side, text, in_reply_to=top.id
    )
    # GitHub files a reply under a review of its own, which holds just the reply.
    holder = model.Review(
        call.state.next_id(), pull.repo, pull.number, author, kind, app_id, "COMMENTED", "",
        review.commit_id, [reply],
    )  # fmt: skip
    call.state.reviews[holder.id] = holder
    return Answer(201, call.render.review_comment(holder, reply))
