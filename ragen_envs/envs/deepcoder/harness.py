"""Harnesses that judge a candidate solution from outside it (spec: ``docs/envs/deepcoder.md``).

A harness is trusted Python source run by :func:`ragen_envs.sandbox.run_python` next to
the candidate, not inside it: the candidate runs as ``__main__`` in its own process,
the harness in another process of the same sandbox, calling the candidate's functions
through proxies (plain-data arguments in, plain-data results out) and sending its
findings with ``report(value)`` over a channel the candidate has no descriptor for.
Nothing the candidate prints, and no object it returns (a result that is not plain
data is a wrong answer shown by its ``repr`` text; a result whose ``==`` lies cannot
exist on the harness side), can become a verdict.  Results of types Python's ``==``
compares by a plain value (subclasses of the built-in types, ``Fraction``, ``Decimal``)
are turned into that value in the candidate's process first (:data:`PLAIN_RESULTS`).

* stdin/stdout tests need no harness: the candidate runs as it is and its output is
  compared on the host.
* :func:`call_harness` calls the function (or the method of a fresh ``Solution()``
  when the candidate defines that class, as LeetCode-style starter code does) and
  reports ``("value", result)``, ``("repr", text)`` for a result that is not plain
  data, or ``("raise", "Type: message")``.
* :func:`check_harness` runs HumanEval test code in which every ``assert`` of ``check``
  is rewritten (AST transform) to record its own outcome and go on, so that a
  problem's score is the share of its asserts that hold, and reports one
  ``(index, passed, detail)`` per evaluated assert (an assert of a constant, like
  HumanEval's ``assert True, "..."`` debugging lines, is left alone and not counted).
  An assert that raises (including ``SystemExit`` from the candidate) fails; asserts
  never reached (the candidate failed to load, a timeout) count as failed.  The
  problem's reference code (HumanEval: prompt + canonical body) is defined first, so
  the names the test code uses besides ``candidate`` — prompt helpers such as ``poly``
  or ``encode_cyclic``, the entry point in self-referential asserts — are the
  problem's: a candidate's own ``poly`` returning 0 or identity ``encode_*`` /
  ``decode_*`` cannot pass; ``candidate`` is the program's entry
  point.  Without reference code (MBPP, whose asserts call the function by name),
  names the test code does not define are the candidate's.
"""

from __future__ import annotations

import ast
import math
from typing import Any

__all__ = [
    "PLAIN_RESULTS",
    "call_harness",
    "check_harness",
    "count_asserts",
    "py_literal",
    "with_plain_results",
]

#: Trusted code appended to the candidate's program, so that it runs in the candidate's
#: process: ``__ragen_plain_call(name, prefer_method, args)`` calls the function as the
#: sandbox's own call does (a method of a fresh ``Solution()`` when ``prefer_method`` and
#: that class has it) and returns the result as plain data the transport carries: an
#: instance of a subclass of ``int`` / ``float`` / ``str`` / ``bytes`` / ``list`` /
#: ``tuple`` / ``dict`` / ``set`` / ``frozenset`` becomes its base-type value (read with
#: the base type's own C methods, not the subclass's), a ``fractions.Fraction`` or
#: ``decimal.Decimal`` an ``int`` when it is an integer, else the nearest ``float``;
#: anything else is left as it is (then not plain data: a wrong answer shown by its
#: ``repr``).  The verdict is still computed outside the candidate, on plain data only:
#: whatever this code returns, the candidate could have returned itself, so tampering with
#: it gains nothing (an object's lying ``__eq__`` never reaches the comparison).
PLAIN_RESULTS = """


def __ragen_plain(v, depth=0):
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str or t is complex:
        return v
    if depth > 60:
        return v
    d = depth + 1
    try:
        if isinstance(v, int):
            return int.__int__(v)
        if isinstance(v, float):
            return float.__float__(v)
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, bytes):
            return bytes.__bytes__(v)
        if isinstance(v, list):
            return [__ragen_plain(x, d) for x in list.copy(v)]
        if isinstance(v, tuple):
            return tuple([__ragen_plain(x, d) for x in tuple.__getnewargs__(v)[0]])
        if isinstance(v, dict):
            return {__ragen_plain(k, d): __ragen_plain(x, d) for k, x in dict.items(v)}
        if isinstance(v, frozenset):
            return frozenset([__ragen_plain(x, d) for x in frozenset.copy(v)])
        if isinstance(v, set):
            return {__ragen_plain(x, d) for x in set.copy(v)}
        import sys

        fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
        if fractions is not None and isinstance(v, fractions.Fraction):
            return int(v.numerator) if v.denominator == 1 else float(v)
        if decimal is not None and isinstance(v, decimal.Decimal):
            if v.is_finite() and v == v.to_integral_value():
                return int(v)
            return float(v)
    except Exception:
        pass
    return v


def __ragen_plain_call(name, prefer_method, args):
    # the sandbox launcher's own choice of function (_serve_calls; it cannot be imported
    # here: the launcher is a self-contained script, gone from sys.modules in this process)
    g = globals()
    cls = g.get("Solution") if prefer_method else None
    if isinstance(cls, type) and hasattr(cls, name):
        fn = getattr(cls(), name)
    elif name in g:
        fn = g[name]
    else:
        raise NameError(f"name {name!r} is not defined")
    return __ragen_plain(fn(*args))
"""

#: The harness's call of a program function through ``__ragen_plain_call``; a program that
#: ended its top level with ``sys.exit()`` never defined it, and is called directly.
_ENTRY = """
__RAGEN_MISSING = "NameError: name '__ragen_plain_call' is not defined"


def __ragen_entry(name, prefer_method=False):
    plain, direct = program("__ragen_plain_call"), program(name, prefer_method=prefer_method)

    def call(*args):
        try:
            return plain(name, prefer_method, list(args))
        except ProgramError as exc:
            if str(exc) != __RAGEN_MISSING:
                raise
        return direct(*args)

    call.__name__ = name
    return call

"""

_CALL_HARNESS = (
    _ENTRY
    + """
try:
    __ragen_result = __ragen_entry({fn!r}, prefer_method=True)(*{args})
except ProgramError as __ragen_e:
    report(("raise", str(__ragen_e)))
else:
    if isinstance(__ragen_result, Unserializable):
        report(("repr", __ragen_result.text))
    else:
        report(("value", __ragen_result))
"""
)

_CHECK_PRELUDE = (
    _ENTRY
    + """
def __ragen_record(_idx, _ok, _detail):
    report((_idx, _ok is True, str(_detail)[:300]))

"""
)


def with_plain_results(code: str) -> str:
    """The candidate's program followed by :data:`PLAIN_RESULTS` (for call and check tests)."""
    return code.rstrip("\n") + "\n" + PLAIN_RESULTS


def py_literal(value: Any) -> str:
    """A Python expression for a JSON value (``float("inf")``/``float("nan")`` for non-finite floats).

    Used to embed test arguments in a driver without importing ``json`` in the
    sandboxed process (which costs ~10 ms).
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({repr(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(py_literal(v) for v in value)
        return f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise TypeError(f"cannot embed a {type(value).__name__} as a test argument")


class _AssertRewriter(ast.NodeTransformer):
    """Replace each ``assert`` by code that records (index, passed, detail)."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> Any:
        if isinstance(node.test, ast.Constant):
            return node  # ``assert True, "..."`` (HumanEval debugging lines) is not a test
        idx = self.count
        self.count += 1
        src = ast.unparse(node.test)[:200]
        test = node.test
        pre: list[ast.stmt] = []
        detail: ast.expr = ast.Constant(f"assert {src}")
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            # Evaluate both sides once so that the feedback can show the value obtained.
            pre = [
                ast.Assign([ast.Name("__ragen_l", ast.Store())], test.left),
                ast.Assign([ast.Name("__ragen_r", ast.Store())], test.comparators[0]),
            ]
            test = ast.Compare(
                ast.Name("__ragen_l", ast.Load()), [ast.Eq()], [ast.Name("__ragen_r", ast.Load())]
            )
            got = ast.Subscript(
                ast.Call(ast.Name("repr", ast.Load()), [ast.Name("__ragen_l", ast.Load())], []),
                ast.Slice(None, ast.Constant(200), None),
                ast.Load(),
            )
            detail = ast.BinOp(
                ast.BinOp(ast.Constant(f"assert {src}  (got "), ast.Add(), got),
                ast.Add(),
                ast.Constant(")"),
            )
        ok_name = ast.Name("__ragen_ok", ast.Store())
        body = [*pre, ast.Assign([ok_name], ast.Call(ast.Name("bool", ast.Load()), [test], []))]
        record_ok = ast.Expr(
            ast.Call(
                ast.Name("__ragen_record", ast.Load()),
                [ast.Constant(idx), ast.Name("__ragen_ok", ast.Load()), detail],
                [],
            )
        )
        handler = ast.ExceptHandler(
            type=ast.Name("BaseException", ast.Load()),
            name="__ragen_e",
            body=[
                ast.Expr(
                    ast.Call(
                        ast.Name("__ragen_record", ast.Load()),
                        [
                            ast.Constant(idx),
                            ast.Constant(False),
                            ast.BinOp(
                                ast.Constant(f"assert {src} raised "),
                                ast.Add(),
                                ast.Call(
                                    ast.Name("repr", ast.Load()),
                                    [ast.Name("__ragen_e", ast.Load())],
                                    [],
                                ),
                            ),
                        ],
                        [],
                    )
                )
            ],
        )
        new = ast.Try(body=body, handlers=[handler], orelse=[record_ok], finalbody=[])
        return ast.copy_location(new, node)


def _rewrite_check(test_code: str) -> tuple[str, int]:
    tree = ast.parse(test_code)
    rewriter = _AssertRewriter()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            rewriter.visit(node)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), rewriter.count


def count_asserts(test_code: str) -> int:
    """Number of ``assert`` statements in the test code's ``check`` function (the test count)."""
    return _rewrite_check(test_code)[1]


def check_harness(test_code: str, entry_point: str, reference: str = "") -> tuple[str, int]:
    """Harness running HumanEval-style ``test_code`` against the candidate's ``entry_point``.

    Args:
        test_code: code defining ``check(candidate)``.
        entry_point: the candidate's function passed to ``check``.
        reference: trusted problem code defined before ``test_code`` (module docstring).

    Returns:
        ``(harness, n_asserts)``; the harness reports ``(index, passed, detail)`` once
        per evaluated assert.

    Raises:
        SyntaxError: ``test_code`` does not parse (a data error, not the candidate's).
    """
    rewritten, n = _rewrite_check(test_code)
    if reference:
        ast.parse(reference)  # a data error (SyntaxError), not the candidate's
    # Without reference code the asserts call the entry point by name: the candidate's.
    by_name = "" if reference else f"{entry_point} = __ragen_entry({entry_point!r})\n"
    driver = (
        "\n\ntry:\n"
        f"    check(__ragen_entry({entry_point!r}))\n"
        "except BaseException as __ragen_e:\n"
        "    import sys as __ragen_sys\n"
        "    __ragen_sys.stderr.write('check stopped: ' + repr(__ragen_e)[:300] + '\\n')\n"
    )
    return _CHECK_PRELUDE + by_name + reference + "\n\n" + rewritten + driver, n


def call_harness(fn_name: str, args: tuple[Any, ...] | list[Any]) -> str:
    """Harness calling the candidate's ``fn_name(*args)`` (JSON arguments) and reporting the result.

    Reports one ``("value", result)``, ``("repr", text)`` or ``("raise", "Type: message")``.
    """
    return _CALL_HARNESS.format(args=py_literal(list(args)), fn=fn_name)
