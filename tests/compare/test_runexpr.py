"""The runs-table filter expression: what it accepts, what it refuses (with messages), three-valued logic."""

from __future__ import annotations

import math

import pytest

from monitor_cb.compare.runexpr import MAX_LENGTH, ExprError, compile_filter

NAMES = ["lr", "status", "name", "loss.best", "loss.last", "optim.lr", "seed", "model-size", "tags", "amp"]
ROWS = {
    "a": {"lr": 1e-4, "status": "finished", "name": "a-AdamW", "loss.best": 0.5, "loss.last": 0.6, "seed": 1},
    "b": {"lr": 3e-3, "status": "finished", "name": "b-sgd", "loss.best": 0.9, "loss.last": math.nan, "seed": 2},
    "c": {"lr": 5e-4, "status": "failed", "name": "c-adam", "loss.best": None, "optim.lr": 0.1, "tags": ["x", "y"]},
    "d": {"status": "running", "name": "d", "model-size": 7, "lr": "0.0002", "amp": True},  # lr logged as text
}


def matching(expression: str) -> list[str]:
    keep = compile_filter(expression, NAMES)
    return [run for run, row in ROWS.items() if keep(row)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('lr < 1e-3 and status == "finished"', ["a"]),
        ("lr < 1e-3", ["a", "c", "d"]),  # "0.0002" compares as a number
        ("1e-4 <= lr < 1e-3", ["a", "c", "d"]),
        ('status in ("failed", "running")', ["c", "d"]),
        ('status not in ["failed", "running"]', ["a", "b"]),
        ('"adam" in name', ["a", "c"]),  # case-insensitive substring
        ('"x" in tags', ["c"]),
        ("loss.best < 0.8", ["a"]),  # a dotted name is a column, not attribute access
        ("optim.lr > 0", ["c"]),
        ("`model-size` >= 7", ["d"]),
        ("loss.last == nan", ["b"]),
        ("loss.last != nan", ["a"]),  # c and d have no loss.last: unknown, not kept
        ("not lr > 1e-3", ["a", "c", "d"]),
        ("seed == 1 or seed == 2", ["a", "b"]),
        ("seed * 2 == 4", ["b"]),
        ("-seed < -1.5", ["b"]),
        ("amp == true", ["d"]),
        ("amp", ["d"]),
        ("loss.best == None", ["c"]),
        ("", ["a", "b", "c", "d"]),
    ],
)
def test_expressions_select_the_right_runs(expression: str, expected: list[str]) -> None:
    assert matching(expression) == expected


def test_missing_values_are_unknown_in_three_valued_logic() -> None:
    # b has no optim.lr: "optim.lr > 0" is unknown, "not (...)" stays unknown, "... or True" is true
    assert matching("not optim.lr > 0") == []
    assert matching("optim.lr > 0 or seed == 2") == ["b", "c"]
    assert matching("optim.lr > 0 and seed == 2") == []


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "function call"),
        ("open('/etc/passwd')", "function call"),
        ("lr.__class__", "unknown column 'lr.__class__'"),
        ("name[0] == 'a'", "indexing"),
        ("(lambda: 1)()", "function call"),
        ("lr ** 2 < 1", r"\*\*"),
        ("'a' * 10 ** 9", r"\*\*"),
        ("[x for x in tags]", "comprehension"),
        ("lr is None", "'is'"),
        ("lrr < 1", "unknown column 'lrr'; did you mean lr"),
        ("stauts == 'failed'", "did you mean status"),
        ("lr <", "cannot read the expression"),
        ("status = 'failed'", "cannot read the expression"),
        ("`model-size > 3", "backtick at column 1 is not closed"),
        ("(lr := 1)", ":="),
        ("{'a': 1}", "a dict"),
        ("f'{lr}' == '1'", "f-string"),
        ("b'x' in name", "bytes constant"),
        ("().__class__.__bases__", "attribute access"),
    ],
)
def test_forbidden_or_broken_expressions_say_why(expression: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        compile_filter(expression, NAMES)


def test_error_names_the_offending_part() -> None:
    with pytest.raises(ExprError, match=r"column 16: 'len\(name\)'"):
        compile_filter("lr < 1 and 3 < len(name)", NAMES)


def test_hostile_sizes_are_refused_before_parsing() -> None:
    with pytest.raises(ExprError, match="limit is"):
        compile_filter("lr < 1 and " * (MAX_LENGTH // 10) + "lr < 1", NAMES)
    with pytest.raises(ExprError, match="parts; the limit"):
        compile_filter(" or ".join(["lr < 1"] * 100), NAMES)
    with pytest.raises(ExprError):
        compile_filter("(" * 400 + "lr" + ")" * 400, NAMES)


def test_string_arithmetic_never_runs() -> None:
    # "x" * 10**9 would build a gigabyte: strings never take part in arithmetic
    keep = compile_filter("name * 1000000000 == 'x'", NAMES)
    assert not keep({"name": "x"})


def test_the_filter_never_evaluates_user_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec called")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    assert matching('lr < 1e-3 and status == "finished"') == ["a"]


def test_a_config_nan_stored_as_text_is_nan() -> None:
    """The log format writes a NaN as the text "NaN"; a config keeps it so, and ``== nan`` must find it."""
    keep = compile_filter("wd == nan", ["wd"])
    assert keep({"wd": "NaN"}) and keep({"wd": math.nan})
    assert not keep({"wd": 0.1}) and not keep({"wd": "nan-ish"})
    assert compile_filter("wd != nan", ["wd"])({"wd": 0.1}) and not compile_filter("wd != nan", ["wd"])({"wd": "NaN"})


def test_integers_beyond_a_double_are_infinity_in_arithmetic() -> None:
    """A config may hold a 2,150-digit JSON integer; ``(big*big*big) in status`` once raised Python's
    ValueError for str() of over 4,300 digits, and a long product cost seconds per row."""
    big = int("9" * 2150)
    row = {"big": big, "status": "finished"}

    def keep(expression: str) -> bool:
        return compile_filter(expression, None)(row)

    assert not keep("(big*big*big) in status") and not keep("status in (big*big*big,)")
    assert keep("big*big > 1e300") and keep("-big*big < -1e300") and keep("big > 5")
    assert not keep("big - big == 0"), "infinity minus infinity is NaN: not equal to anything"
    product = "*".join(["big"] * 60)
    assert keep(f"{product} > 0")
    assert keep("big*0 != 0"), "infinity times zero is NaN, never 0"
    exact = {"n": 2**60 + 1}
    assert compile_filter("n*2 == 2305843009213693954", None)(exact), "integers in a double's range stay exact"
