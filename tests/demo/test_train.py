"""monitor_cb.demo.train: the fault plan and the epochs (the training itself: tests/commands/test_demo.py)."""

from __future__ import annotations

import pytest

from monitor_cb.demo import train


@pytest.mark.parametrize(
    ("specs", "message"),
    [(["nan"], "FAULT@STEP"), (["fire@3"], "FAULT@STEP"), (["nan@0"], "between 1"), (["nan@x"], "between 1")],
)
def test_bad_injections_are_explained(specs: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        train.parse_injections(specs, steps=10)


def test_injections_and_epochs() -> None:
    assert train.parse_injections(["nan@4", "overfit@9"], steps=10) == {"nan": 4, "overfit": 9}
    assert train.epochs_for(2000) == (10, 200) and train.epochs_for(10) == (1, 10)
