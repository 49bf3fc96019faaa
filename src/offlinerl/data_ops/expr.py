"""Episode and step predicates written by users (``--where``, ``--terminal-when``), parsed safely.

The text is parsed with :func:`ast.parse` and only a small grammar is accepted: numbers, strings,
``True``/``False``, names from the caller's list, comparisons (``< <= > >= == !=``), ``and``/``or``/``not``,
``+ - * /``, unary minus, ``abs(x)``, aggregate calls ``mean(c) sum(c) min(c) max(c) first(c) last(c)`` over a
per-step column ``c``, and indexing by a constant integer (``next_obs[0]``). Nothing is ever evaluated by
Python: :func:`evaluate` walks the checked tree over numpy arrays (one value per episode or per step).
"""

from __future__ import annotations

import ast
import io
import keyword
import operator
import tokenize
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from offlinerl.data_ops.errors import DataOpError

__all__ = ["AGGREGATES", "ALLOWED", "Expression", "ExpressionError", "parse"]

#: Longest expression accepted, and most syntax nodes in it.
MAX_CHARS = 1000
MAX_NODES = 200
#: Aggregates of a per-step column over an episode.
AGGREGATES = ("mean", "sum", "min", "max", "first", "last")

_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class ExpressionError(DataOpError):
    """An expression that is not in the accepted grammar, or names something unknown."""


@dataclass(frozen=True)
class Expression:
    """A checked expression: its text, tree, the plain names and the ``(aggregate, column)`` calls it uses."""

    text: str
    tree: ast.Expression
    names: frozenset[str]
    aggregates: frozenset[tuple[str, str]]
    what: str = "--where"
    """The option it came from, for errors."""

    def check_widths(self, widths: Mapping[str, int]) -> None:
        """Refuse an index past the width of the name it indexes, and a name of several dimensions used whole
        (``widths``: name -> dimensions): a predicate gives one truth value per step."""
        indexed = {id(node.value) for node in ast.walk(self.tree) if isinstance(node, ast.Subscript)}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Subscript) and node.value.id in widths:
                width = widths[node.value.id]
                if not -width <= node.slice.value < width:
                    raise ExpressionError(f"{node.value.id}[{node.slice.value}]: index out of range (it has "
                                          f"{width} dimension(s)) in {self.text!r}")
            elif isinstance(node, ast.Name) and id(node) not in indexed and widths.get(node.id, 1) > 1:
                raise ExpressionError(f"{node.id} has {widths[node.id]} dimensions: index one, e.g. {node.id}[0], "
                                      f"in {self.text!r}")

    def evaluate(self, values: Mapping[str, Any]) -> np.ndarray:
        """The value over ``values`` (names, and ``"agg(col)"`` for aggregates, to arrays of one length)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            try:
                return np.asarray(_eval(self.tree.body, values))
            except TypeError as exc:  # numpy's: a number against a string (``length > 'a'``)
                raise ExpressionError(f"{self.what}: cannot compute {self.text!r}: it mixes values of types that "
                                      f"do not go together ({exc})") from None


#: What the grammar allows, for the errors.
ALLOWED = ("numbers, 'strings', True/False, comparisons < <= > >= == !=, and/or/not, + - * /, abs(x), "
           "mean/sum/min/max/first/last(column) and name[INDEX]")
#: What users call the syntax the grammar refuses most often.
_KINDS = {ast.Attribute: "an attribute (x.y)", ast.List: "a list", ast.Tuple: "a tuple", ast.Dict: "a dict",
          ast.Set: "a set", ast.Lambda: "a lambda", ast.IfExp: "an if-else", ast.NamedExpr: "an assignment (:=)",
          ast.Starred: "a star (*x)", ast.JoinedStr: "an f-string", ast.ListComp: "a comprehension",
          ast.GeneratorExp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
          ast.Slice: "a slice", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield"}
_OPERATORS = {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
              ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.Invert: "~", ast.UAdd: "unary +",
              ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


def parse(text: str, *, names: Sequence[str], columns: Sequence[str] = (), what: str = "--where",
          predicate: bool = False, booleans: Sequence[str] = ()) -> Expression:
    """Check ``text`` against the grammar; ``names`` may appear bare, ``columns`` inside aggregates.
    ``predicate``: the value must be a truth value (a comparison, ``and``/``or``/``not`` of truth values, True/False
    or one of the names in ``booleans``), not a number that Python would take as true when non-zero.
    Raises :class:`ExpressionError` (one line starting with ``what``, quoting the text)."""
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"{what}: longer than {MAX_CHARS} characters")
    source = _keywords_as_names(text.strip(), names)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{what}: {text!r} is not a complete expression ({exc.msg}); write e.g. "
                              f"{_example(what)!r}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExpressionError(f"{what}: more than {MAX_NODES} parts; write a shorter expression")
    used: set[str] = set()
    aggs: set[tuple[str, str]] = set()
    known = ", ".join(sorted(names))

    def bad(node: ast.AST, why: str) -> ExpressionError:
        part = (ast.get_source_segment(source, node) or "").replace(_KEYWORD, "")
        where = f"{part!r} in {text!r}" if part and part != text.strip() else repr(text)
        return ExpressionError(f"{what}: {why}: {where}")

    def refused(node: ast.AST) -> ExpressionError:
        op = getattr(node, "op", None)
        ops = getattr(node, "ops", [])
        symbol = _OPERATORS.get(type(op)) or next((_OPERATORS[type(o)] for o in ops if type(o) in _OPERATORS), None)
        kind = f"the operator {symbol}" if symbol else _KINDS.get(type(node), "this kind of expression")
        return bad(node, f"{kind} is not allowed (allowed: {ALLOWED})")

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, str, bool)):
                raise bad(node, f"the constant {node.value!r} is not allowed (allowed: numbers, 'strings', True/False)")
        elif isinstance(node, ast.Name):
            node.id = node.id[len(_KEYWORD):] if node.id.startswith(_KEYWORD) else node.id
            if node.id in columns and node.id not in names:
                raise bad(node, f"{node.id!r} is a per-step column: use it inside an aggregate, e.g. "
                                f"mean({node.id}) or last({node.id})")
            if node.id not in names:
                raise bad(node, f"unknown name {node.id!r} (known: {known})")
            used.add(node.id)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                check(v)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            check(node.operand)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            for v in [node.left, *node.comparators]:
                check(v)
        elif isinstance(node, ast.Subscript):
            index = node.slice
            if not (isinstance(index, ast.Constant) and isinstance(index.value, int)
                    and not isinstance(index.value, bool) and isinstance(node.value, ast.Name)):
                raise bad(node, "only a name indexed by a constant integer, e.g. next_obs[0], is allowed")
            check(node.value)
        elif isinstance(node, ast.Call):
            fn = node.func.id if isinstance(node.func, ast.Name) else None
            if fn == "abs" and len(node.args) == 1 and not node.keywords:
                check(node.args[0])
                return
            if fn not in AGGREGATES or len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Name):
                raise bad(node, f"only abs(x) and {', '.join(a + '(column)' for a in AGGREGATES)} may be called")
            col = node.args[0].id
            if col not in columns:
                raise bad(node, f"unknown column {col!r} (per-step columns: {', '.join(columns) or 'none'})")
            aggs.add((fn, col))
        else:
            raise refused(node)

    check(tree.body)
    if predicate:
        _check_truth(tree.body, frozenset(booleans), bad)
    return Expression(text=text, tree=tree, names=frozenset(used), aggregates=frozenset(aggs), what=what)


_KEYWORD = "__kw_"


def _example(what: str) -> str:
    return "next_obs[0] > 0.45" if what == "--terminal-when" else "return > 100 and length < 200"


def _check_truth(node: ast.AST, booleans: frozenset[str], bad: Callable[[ast.AST, str], ExpressionError]) -> None:
    """Refuse a predicate whose value is not a truth value (``return``, ``length + 1``, ``rewards``...)."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check_truth(value, booleans, bad)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check_truth(node.operand, booleans, bad)
    elif not (isinstance(node, ast.Compare) or (isinstance(node, ast.Constant) and isinstance(node.value, bool))
              or (isinstance(node, ast.Name) and node.id in booleans)):
        flags = f" or one of {', '.join(sorted(booleans))}" if booleans else ""
        raise bad(node, f"a predicate needs a comparison (e.g. > 0){flags}, joined by and/or/not; this is not "
                        "true or false")


def _keywords_as_names(text: str, names: Sequence[str]) -> str:
    """``text`` with the Python keywords among ``names`` (``return``) spelt so :func:`ast.parse` reads them as names;
    nothing else changes (so the parts of the tree quote the text as the user wrote it)."""
    words = {n for n in names if keyword.iskeyword(n)}
    if not words:
        return text
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text  # ast.parse names the problem
    lines = text.splitlines(keepends=True)
    for t in reversed(tokens):  # from the end: earlier positions stay valid
        if t.type == tokenize.NAME and t.string in words:
            row, col = t.start[0] - 1, t.start[1]
            lines[row] = lines[row][:col] + _KEYWORD + lines[row][col:]
    return "".join(lines)


def _eval(node: ast.AST, values: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BoolOp):
        parts = [np.asarray(_eval(v, values), dtype=bool) for v in node.values]
        combine: Callable = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = parts[0]
        for p in parts[1:]:
            out = combine(out, p)
        return out
    if isinstance(node, ast.UnaryOp):
        x = _eval(node.operand, values)
        return np.logical_not(x) if isinstance(node.op, ast.Not) else -np.asarray(x)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](np.asarray(_eval(node.left, values)), np.asarray(_eval(node.right, values)))
    if isinstance(node, ast.Compare):
        left = np.asarray(_eval(node.left, values))
        out = None
        for op, right in zip(node.ops, node.comparators):
            r = np.asarray(_eval(right, values))
            part = _COMPARE[type(op)](left, r)
            out = part if out is None else np.logical_and(out, part)
            left = r
        return out
    if isinstance(node, ast.Subscript):
        arr = np.asarray(values[node.value.id])
        i = node.slice.value
        if arr.ndim == 1 and i in (0, -1):
            return arr  # one dimension: x[0] is x
        if arr.ndim < 2 or not -arr.shape[1] <= i < arr.shape[1]:
            width = arr.shape[1] if arr.ndim >= 2 else 1
            raise ExpressionError(f"{node.value.id}[{i}]: index out of range (it has {width} dimension(s))")
        return arr[:, i]
    if isinstance(node, ast.Call):
        if node.func.id == "abs":
            return np.abs(np.asarray(_eval(node.args[0], values)))
        return values[f"{node.func.id}({node.args[0].id})"]
    raise ExpressionError(f"cannot evaluate {type(node).__name__}")  # parse() lets nothing else through
