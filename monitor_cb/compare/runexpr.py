"""A safe filter expression over the runs table: ``lr < 1e-3 and status == "finished"``.

The text is parsed with :mod:`ast` and only a whitelist of nodes is compiled, into plain Python
closures; nothing is ever passed to ``eval``. Allowed:

* names of table columns (``lr``, ``status``, ``loss.best``, ``optim.lr``: a dotted name is one
  column name, never attribute access; any other name in backticks: `` `model-size` > 3 ``),
  numbers, strings, ``True``/``False``/``None``, ``nan``, ``inf``;
* comparisons ``< <= > >= == !=`` (chains too: ``1e-4 <= lr < 1e-2``), ``in`` / ``not in``
  (``status in ("failed", "crashed")``; ``"adam" in optimizer`` is a case-insensitive substring test);
* ``and``, ``or``, ``not``, unary ``-``/``+``, and ``+ - * /`` between numbers;
* tuples and lists of constants (for ``in``).

Calls, subscripts, attribute access on values, lambdas, comprehensions, ``**`` and everything
else are refused with a message that names the construct and its column.

A value a run does not have (a config key it lacks) makes a comparison *unknown*, and so does
comparing a number with a non-numeric string; ``and``/``or``/``not`` use three-valued logic
(as SQL does with NULL) and a run is kept only when the whole expression is true. ``x == nan``
is true when ``x`` is NaN (unlike IEEE), so ``loss.last == nan`` finds runs that ended in NaN; a config
value NaN, which the log format stores as the text ``"NaN"``, counts as NaN too.

Arithmetic stays within a double's range: an integer beyond it (a JSON config may hold one of 4,300
digits) counts as ±infinity in ``+ - * /``, so ``big*big*big`` neither builds a number Python refuses
to print (``str()`` of over 4,300 digits raises ValueError) nor costs time per row.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
from collections.abc import Callable, Collection, Mapping
from typing import Any

MAX_LENGTH = 2000
MAX_NODES = 300
_CONSTANT_NAMES = {"nan": math.nan, "inf": math.inf, "true": True, "false": False, "none": None}


class ExprError(ValueError):
    """The filter expression cannot be used; the message says what is wrong and where."""


class _Missing:
    """A value the run does not have."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
Row = Mapping[str, Any]
_Eval = Callable[[Row], Any]  # -> a value, MISSING, or for predicates True / False / None (unknown)

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ARITH: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def compile_filter(text: str, names: Collection[str] | None) -> Callable[[Row], bool]:
    """A predicate over table rows (``{column: value}``) from the expression ``text``.

    Args:
        text: the expression the user typed.
        names: the column names it may use (unknown names are an error, with suggestions);
            None accepts any name (a value no row has is missing).

    Raises:
        ExprError: the text does not parse, uses something not allowed, or names an unknown column.
    """
    source = text.strip()
    if not source:
        return lambda row: True
    if len(source) > MAX_LENGTH:
        raise ExprError(f"the expression is {len(source):,} characters long; the limit is {MAX_LENGTH:,}")
    source, quoted = _unquote_backticks(source)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise ExprError(f"cannot read the expression{where}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError("cannot read the expression: it is nested too deeply or contains a null byte") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise ExprError(f"the expression has {count} parts; the limit is {MAX_NODES}")
    evaluate = _Compiler(source, None if names is None else frozenset(names), quoted).node(tree.body)
    return lambda row: evaluate(row) is True


def _unquote_backticks(source: str) -> tuple[str, dict[str, str]]:
    """Backtick-quoted names (outside string literals) replaced by placeholder identifiers."""
    out: list[str] = []
    quoted: dict[str, str] = {}
    i, quote = 0, ""
    while i < len(source):
        char = source[i]
        if quote:
            out.append(char)
            if char == "\\" and i + 1 < len(source):
                out.append(source[i + 1])
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "`":
            end = source.find("`", i + 1)
            if end < 0:
                raise ExprError(f"a backtick at column {i + 1} is not closed")
            placeholder = f"__column_{len(quoted)}__"
            quoted[placeholder] = source[i + 1 : end]
            out.append(placeholder)
            i = end
        else:
            out.append(char)
        i += 1
    return "".join(out), quoted


def _truth(value: Any) -> bool | None:
    """A value as a condition: True/False, or None (unknown) for a missing value."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return bool(value)


_MAX_BITS = 1024  # a double's range: larger integers are infinity in arithmetic


def _bounded(value: float | int) -> float | int:
    """An integer beyond a double's range as ±infinity; anything else as it is."""
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        return math.inf if value > 0 else -math.inf
    return value


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def compare(op: type[ast.cmpop], left: Any, right: Any) -> bool | None:
    """``left <op> right`` with the module's rules (unknown for missing values or mixed types)."""
    if left is MISSING or right is MISSING:
        return None
    if op in (ast.In, ast.NotIn):
        found = _contains(right, left)
        return found if found is None or op is ast.In else not found
    if op in (ast.Eq, ast.NotEq) and (_is_nan(left) or _is_nan(right)):
        same = _is_nan(left) and _is_nan(right)
        return same if op is ast.Eq else not same
    if isinstance(left, str) and isinstance(right, str):
        return _COMPARE[op](left, right)
    if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):  # config lists, compared whole
        return None if op not in (ast.Eq, ast.NotEq) else _COMPARE[op](list(left), list(right))
    if left is None or right is None:  # a JSON null in a config
        if op not in (ast.Eq, ast.NotEq):
            return None
        return (left is right) if op is ast.Eq else (left is not right)
    a, b = _number(left), _number(right)
    if a is None or b is None:
        return None
    return _COMPARE[op](a, b)


def _contains(container: Any, item: Any) -> bool | None:
    if isinstance(container, str):
        if not isinstance(item, (str, int, float)):
            return None
        try:
            text = str(item)
        except ValueError:  # an integer over Python's 4,300-digit limit for str()
            return None
        return text.lower() in container.lower()
    if isinstance(container, (tuple, list)):
        return any(compare(ast.Eq, item, c) is True for c in container)
    return None


def _is_nan(value: Any) -> bool:
    """A float NaN, or the text ``"NaN"`` that the log format writes for one (configs keep it as text)."""
    return (isinstance(value, float) and math.isnan(value)) or value == "NaN"


class _Compiler:
    """Turns whitelisted AST nodes into closures; anything else raises :class:`ExprError`."""

    def __init__(self, source: str, names: frozenset[str] | None, quoted: Mapping[str, str]) -> None:
        self.source = source
        self.names = names
        self.quoted = quoted

    def node(self, node: ast.AST) -> _Eval:
        handler = getattr(self, f"_{type(node).__name__}", None)
        if handler is None:
            raise self.error(node, f"{_describe(node)} is not allowed in a filter")
        return handler(node)

    def error(self, node: ast.AST, message: str) -> ExprError:
        col = getattr(node, "col_offset", None)
        snippet = ast.get_source_segment(self.source, node) or ""
        for placeholder, name in self.quoted.items():
            snippet = snippet.replace(placeholder, f"`{name}`")
        where = f" (column {col + 1}: {snippet[:40]!r})" if col is not None else ""
        return ExprError(message + where)

    # ------------------------------------------------------------------ leaves
    def _Constant(self, node: ast.Constant) -> _Eval:
        value = node.value
        if not isinstance(value, (str, int, float, bool)) and value is not None:
            raise self.error(node, f"a {type(value).__name__} constant is not allowed")
        return lambda row: value

    def _Name(self, node: ast.Name) -> _Eval:
        return self._lookup(node, self.quoted.get(node.id, node.id))

    def _Attribute(self, node: ast.Attribute) -> _Eval:
        return self._lookup(node, _dotted(node) or self._refuse_attribute(node))

    def _refuse_attribute(self, node: ast.Attribute) -> str:
        raise self.error(node, "attribute access is not allowed (a dotted name must be a column name)")

    def _lookup(self, node: ast.AST, name: str) -> _Eval:
        if self.names is None or name in self.names:
            if self.names is None and name.lower() in _CONSTANT_NAMES:
                value = _CONSTANT_NAMES[name.lower()]
                return lambda row: row.get(name, value)
            return lambda row: row.get(name, MISSING)
        if name.lower() in _CONSTANT_NAMES:
            value = _CONSTANT_NAMES[name.lower()]
            return lambda row: value
        close = difflib.get_close_matches(name, sorted(self.names), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise self.error(node, f"unknown column {name!r}{hint}")

    def _Tuple(self, node: ast.Tuple | ast.List) -> _Eval:
        items = [self.node(e) for e in node.elts]
        return lambda row: tuple(item(row) for item in items)

    _List = _Tuple

    # ------------------------------------------------------------------ operators
    def _Compare(self, node: ast.Compare) -> _Eval:
        operands = [self.node(node.left)] + [self.node(c) for c in node.comparators]
        ops = []
        for op in node.ops:
            if type(op) not in _COMPARE and not isinstance(op, (ast.In, ast.NotIn)):
                raise self.error(node, f"the comparison {_describe(op)} is not allowed (use ==, !=, <, >, in)")
            ops.append(type(op))

        def run(row: Row) -> bool | None:
            values = [operand(row) for operand in operands]
            results = [compare(op, values[i], values[i + 1]) for i, op in enumerate(ops)]
            return _all(results)

        return run

    def _BoolOp(self, node: ast.BoolOp) -> _Eval:
        parts = [self.node(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda row: _all(_truth(p(row)) for p in parts)
        return lambda row: _any(_truth(p(row)) for p in parts)

    def _UnaryOp(self, node: ast.UnaryOp) -> _Eval:
        operand = self.node(node.operand)
        if isinstance(node.op, ast.Not):

            def negate(row: Row) -> bool | None:
                value = _truth(operand(row))
                return None if value is None else not value

            return negate
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1 if isinstance(node.op, ast.USub) else 1

            def signed(row: Row) -> Any:
                raw = operand(row)
                value = None if isinstance(raw, str) else _number(raw)
                return MISSING if value is None else sign * value

            return signed
        raise self.error(node, f"{_describe(node.op)} is not allowed")

    def _BinOp(self, node: ast.BinOp) -> _Eval:
        func = _ARITH.get(type(node.op))
        if func is None:
            raise self.error(node, f"{_describe(node.op)} is not allowed (only + - * / between numbers)")
        left, right = self.node(node.left), self.node(node.right)

        def run(row: Row) -> Any:
            a, b = left(row), right(row)
            if isinstance(a, str) or isinstance(b, str):
                return MISSING  # no string arithmetic: "x" * 10**9 must not build a gigabyte
            x, y = _number(a), _number(b)
            if x is None or y is None:
                return MISSING
            try:
                return _bounded(func(_bounded(x), _bounded(y)))
            except (ZeroDivisionError, OverflowError):
                return math.nan

        return run


def _all(values: Any) -> bool | None:
    """Three-valued AND: False if any is False, else None if any is unknown, else True."""
    unknown = False
    for value in values:
        if value is False:
            return False
        if value is None:
            unknown = True
    return None if unknown else True


def _any(values: Any) -> bool | None:
    """Three-valued OR: True if any is True, else None if any is unknown, else False."""
    unknown = False
    for value in values:
        if value is True:
            return True
        if value is None:
            unknown = True
    return None if unknown else False


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` as the string "a.b.c" when the node is a chain of plain names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


_DESCRIPTIONS = {
    "Call": "a function call",
    "Subscript": "indexing",
    "Lambda": "a lambda",
    "Pow": "**",
    "FloorDiv": "//",
    "Mod": "%",
    "Is": "'is'",
    "IsNot": "'is not'",
    "IfExp": "'x if c else y'",
    "NamedExpr": ":=",
    "ListComp": "a comprehension",
    "GeneratorExp": "a comprehension",
    "SetComp": "a comprehension",
    "DictComp": "a comprehension",
    "Dict": "a dict",
    "Set": "a set",
    "JoinedStr": "an f-string",
    "Starred": "*",
    "Await": "await",
    "BitAnd": "&",
    "BitOr": "|",
    "BitXor": "^",
    "Invert": "~",
    "LShift": "<<",
    "RShift": ">>",
    "MatMult": "@",
}


def _describe(node: ast.AST) -> str:
    name = type(node).__name__
    return _DESCRIPTIONS.get(name, name)
