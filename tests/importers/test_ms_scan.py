"""The numpy path for scalar-only summary events gives exactly what the field-by-field decoder gives."""

from __future__ import annotations

import numpy as np

from monitor_cb.importers.ms_proto import Histogram, decode_event, encode_event
from monitor_cb.importers.ms_scan import scan_scalars
from monitor_cb.importers.tfrecord import encode, frame

TAGS = ["loss", "lr", "grad_norm", "Train/Loss", "损失", "x" * 200, "t\x00ag"]


def random_events(seed: int, n: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    payloads = [encode_event(1.7e9, 0, version="MindSpore.Event:1")]
    for i in range(n):
        k = int(rng.integers(1, 5))
        scalars = [(TAGS[int(rng.integers(len(TAGS)))], float(np.float32(rng.normal()))) for _ in range(k)]
        histograms = []
        if rng.random() < 0.1:
            histograms = [("w", Histogram((0.0, 1.0), (1.0, 1.0), (2, 3), count=5, max=2.0))]
        step = int(rng.choice([i, i * 1_000_003, 2**40 + i]))
        payloads.append(encode_event(1.7e9 + i * 0.5, step, scalars, histograms))
    return payloads


def test_fast_path_equals_the_decoder_on_mixed_events() -> None:
    payloads = random_events(0, 3000)
    data = np.frombuffer(b"".join(encode(p) for p in payloads), np.uint8)
    found = frame(data)
    assert found.n == len(payloads) and found.crc_ok.all()
    fast = scan_scalars(data, found.starts, found.lengths)
    expected_handled = []
    for payload in payloads:
        event = decode_event(payload)
        expected_handled.append(bool(event.scalars) and not event.histograms and event.version is None)
    assert fast.handled.tolist() == expected_handled
    got = [
        (int(r), fast.tags[t], int(s), float(w), float(v))
        for r, t, s, w, v in zip(fast.record, fast.tag, fast.step, fast.wall, fast.value, strict=True)
    ]
    want = []
    for record, payload in enumerate(payloads):
        if expected_handled[record]:
            event = decode_event(payload)
            want += [(record, tag, event.step, event.wall_time, value) for tag, value in event.scalars]
    assert got == want


def test_bytes_that_only_look_like_scalars_go_the_slow_way() -> None:
    good = encode_event(1.7e9, 5, [("loss", 1.0)])
    cases = [
        good[:-1] + b"",  # a value cut short inside the payload
        good.replace(b"\x1d", b"\x15", 1),  # another field where the scalar should be
        good + b"\x30\x01",  # a field after the summary
        encode_event(1.7e9, -1, [("loss", 1.0)]),  # a 10-byte (negative) step
    ]
    data = np.frombuffer(b"".join(encode(p) for p in [good, *cases]), np.uint8)
    found = frame(data)
    fast = scan_scalars(data, found.starts, found.lengths)
    assert fast.handled.tolist() == [True, False, False, False, False]
    assert fast.record.tolist() == [0] and fast.value.tolist() == [1.0]


def test_records_of_one_layout_are_read_as_columns_and_lookalikes_are_not() -> None:
    """A length group read from its first record's layout: a record of that length with another tag, another
    step width or a value where a length should be is left to the field-by-field walk, and all agree."""
    from monitor_cb.importers.ms_scan import _by_template

    payloads = [encode_event(1.7e9 + s, s, [("loss", s / 7), ("lr", 1e-3)]) for s in range(200, 300)]
    same_length = [
        encode_event(1.7e9, 250, [("loss", 1.0), ("lx", 2.0)]),  # another tag, same length
        encode_event(1.7e9, 20, [("losss", 1.0), ("lr", 2.0)]),  # a one-byte step and a longer tag
    ]
    assert all(len(p) == len(payloads[0]) for p in same_length)
    payloads[50:50] = same_length
    data = np.frombuffer(b"".join(encode(p) for p in payloads), np.uint8)
    found = frame(data)
    templated = _by_template(data, found.starts, found.lengths)
    assert templated.handled.sum() == 100 and not templated.handled[50:52].any()
    fast = scan_scalars(data, found.starts, found.lengths)
    assert fast.handled.all()
    got = [
        (int(r), fast.tags[t], int(s), float(v))
        for r, t, s, v in zip(fast.record, fast.tag, fast.step, fast.value, strict=True)
    ]
    want = [
        (r, tag, decode_event(p).step, float(np.float32(v)))
        for r, p in enumerate(payloads)
        for tag, v in decode_event(p).scalars
    ]
    assert got == want
