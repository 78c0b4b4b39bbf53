"""``is_within``: the one check that keeps every read inside the log root."""

from __future__ import annotations

from pathlib import Path

from monitor_cb.ingest.safepath import is_within


def test_inside_dotdot_and_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert is_within(root / "run", root) and is_within(root, root)
    assert not is_within(root / ".." / "other", root)
    (root / "escape").symlink_to(tmp_path / "other")
    assert not is_within(root / "escape", root), "a symlink out of the root is outside"
    (root / "alias").symlink_to(root / "run")
    assert is_within(root / "alias", root)
    assert not is_within(tmp_path / "rootx", root), "a sibling sharing the prefix is outside"
