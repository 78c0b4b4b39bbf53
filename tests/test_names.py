"""How a metric name is shown: escaped, cut in the middle, never changed where it is stored."""

from __future__ import annotations

import pytest

from monitor_cb.names import SHOWN_LIMIT, name_group, shown_name


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("train/loss", "train/loss"),
        ("Losses/Policy Loss", "Losses/Policy Loss"),
        ("a\nb", "a\\nb"),
        ("a\r\tb", "a\\r\\tb"),
        ("x\x1b[31m", "x\\u001b[31m"),  # a terminal escape is text
        ("evil\u202eboF", "evil\\u202eboF"),  # a right-to-left override cannot turn the name around
        ("line\u2028sep", "line\\u2028sep"),
        ("", ""),
    ],
)
def test_control_characters_become_visible_escapes(name: str, shown: str) -> None:
    assert shown_name(name) == shown


def test_a_10_kB_name_is_cut_in_the_middle_and_two_such_names_stay_apart() -> None:
    first = "layer/" + "x" * 10_000 + "/weight"
    second = "layer/" + "x" * 5_000 + "y" + "x" * 4_999 + "/weight"
    a, b = shown_name(first), shown_name(second)
    assert len(a) <= SHOWN_LIMIT and len(b) <= SHOWN_LIMIT
    assert a.startswith("layer/xx") and a.endswith("x/weight")
    assert a != b  # the hash of the whole name tells them apart


def test_names_differing_only_in_case_are_shown_as_written() -> None:
    assert shown_name("Loss") != shown_name("loss")


@pytest.mark.parametrize(
    ("name", "group"),
    [("train/loss", "train"), ("local_norm.layer0", "local_norm"), ("loss", ""), ("/odd", ""), ("a.b/c", "a")],
)
def test_slash_and_dot_group(name: str, group: str) -> None:
    assert name_group(name) == group
