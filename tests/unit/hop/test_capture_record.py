"""What capturing stores of a capture: the record is built before the write, and
the log read's full size is kept (a tail-only read must say it was cut)."""

from __future__ import annotations

from agentchain.hop.capturing import _record
from agentchain.store.outputs import OUTPUT_MAX_BYTES, Capture

CAPTURE = Capture(attempt=1, exit_code=0, pod="job-abc12", deadline=False)


def test_a_read_whole_output_is_stored_whole() -> None:
    record, lost = _record(CAPTURE, (b"hello\n", 6), None)
    assert lost is None
    assert (record.text, record.full_size, record.truncated) == ("hello\n", 6, False)
    assert record.head == "hello\n"
    assert record.capture == CAPTURE


def test_a_tail_of_a_bigger_log_is_marked_cut_with_the_full_size() -> None:
    tail = b"x" * OUTPUT_MAX_BYTES
    record, lost = _record(CAPTURE, (tail, 3 * OUTPUT_MAX_BYTES), None)
    assert lost is None
    assert record.full_size == 3 * OUTPUT_MAX_BYTES
    assert record.truncated
    assert record.head == ""  # The real beginning was never read.


def test_a_vanished_pod_is_a_reason_never_an_empty_output() -> None:
    record, lost = _record(CAPTURE, None, None)
    assert lost == "Pod job-abc12 was gone before its output could be read."
    assert record.unavailable_reason == lost
    assert not record.available


def test_no_pod_at_all_keeps_the_callers_reason() -> None:
    capture = Capture(attempt=2, exit_code=None, pod=None, deadline=True)
    record, lost = _record(capture, None, "The batch Job ended (DeadlineExceeded).")
    assert lost == record.unavailable_reason == "The batch Job ended (DeadlineExceeded)."
