"""Programs that run a candidate solution against one test (spec: ``docs/envs/deepcoder.md``).

* stdin/stdout tests run the candidate as it is.
* :func:`call_program` appends a driver that calls the function (or the method of
  ``class Solution`` when the candidate defines one, as LeetCode-style starter code
  does) with JSON arguments and prints the JSON-encoded result on a marker line.
* :func:`check_program` appends HumanEval test code in which every ``assert`` of
  ``check`` is rewritten (AST transform) to record its own outcome and go on, so that a
  problem's score is the share of its asserts that hold, and prints one marker line per
  evaluated assert (an assert of a constant, like HumanEval's ``assert True, "..."``
  debugging lines, is left alone and not counted).  An assert that raises (including ``SystemExit`` from the
  candidate) fails; asserts never reached (an exception outside an assert, a timeout)
  count as failed.

Marker lines start with :data:`MARKER`; the judge ignores everything else the candidate
prints.  Limitation (documented on the spec page): the candidate runs in the same
process as the driver, as in HumanEval's own harness, so a program written to forge
marker lines can fake a call/check result; stdin/stdout tests are judged outside the
process and cannot be forged that way.
"""

from __future__ import annotations

import ast
import math
from typing import Any

__all__ = ["MARKER", "call_program", "check_program", "count_asserts", "py_literal"]

#: Prefix of the result lines the drivers print (ASCII record separator + tag).
MARKER = "\x1eRAGEN-RESULT "

_CALL_DRIVER = '''

def __ragen_call():
    import sys as _sys
    _args = {args}
    _fn_name = {fn!r}
    _cls = globals().get("Solution")
    if isinstance(_cls, type) and hasattr(_cls, _fn_name):
        _fn = getattr(_cls(), _fn_name)
    else:
        _fn = globals()[_fn_name]
    _result = _fn(*_args)
    _sys.stdout.flush()
    _sys.stdout.write("\\n" + {marker!r} + repr(_result) + "\\n")
    _sys.stdout.flush()

__ragen_call()
'''

_CHECK_PRELUDE = '''

def __ragen_record(_idx, _ok, _detail):
    import sys as _sys
    _sys.stdout.flush()
    _sys.stdout.write("\\n" + {marker!r} + str(_idx) + (" 1 " if _ok else " 0 ") + repr(str(_detail)[:300]) + "\\n")
    _sys.stdout.flush()

'''


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
            test = ast.Compare(ast.Name("__ragen_l", ast.Load()), [ast.Eq()], [ast.Name("__ragen_r", ast.Load())])
            got = ast.Subscript(ast.Call(ast.Name("repr", ast.Load()), [ast.Name("__ragen_l", ast.Load())], []),
                                ast.Slice(None, ast.Constant(200), None), ast.Load())
            detail = ast.BinOp(ast.BinOp(ast.Constant(f"assert {src}  (got "), ast.Add(), got), ast.Add(),
                               ast.Constant(")"))
        ok_name = ast.Name("__ragen_ok", ast.Store())
        body = [*pre, ast.Assign([ok_name], ast.Call(ast.Name("bool", ast.Load()), [test], []))]
        record_ok = ast.Expr(ast.Call(ast.Name("__ragen_record", ast.Load()),
                                      [ast.Constant(idx), ast.Name("__ragen_ok", ast.Load()), detail], []))
        handler = ast.ExceptHandler(
            type=ast.Name("BaseException", ast.Load()), name="__ragen_e",
            body=[ast.Expr(ast.Call(ast.Name("__ragen_record", ast.Load()),
                                    [ast.Constant(idx), ast.Constant(False),
                                     ast.BinOp(ast.Constant(f"assert {src} raised "), ast.Add(),
                                               ast.Call(ast.Name("repr", ast.Load()),
                                                        [ast.Name("__ragen_e", ast.Load())], []))], []))],
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


def check_program(candidate: str, test_code: str, entry_point: str) -> tuple[str, int]:
    """Program running HumanEval-style ``test_code`` against ``candidate``.

    Returns:
        ``(program, n_asserts)``; the program prints ``MARKER <index> <1|0> <repr(detail)>``
        once per evaluated assert.

    Raises:
        SyntaxError: ``test_code`` does not parse (a data error, not the candidate's).
    """
    rewritten, n = _rewrite_check(test_code)
    driver = (
        "\n\ndef __ragen_main():\n"
        f"    check({entry_point})\n\n"
        "try:\n    __ragen_main()\nexcept BaseException as __ragen_e:\n"
        "    import sys as __ragen_sys\n"
        "    __ragen_sys.stderr.write('check stopped: ' + repr(__ragen_e)[:300] + '\\n')\n"
    )
    program = candidate + _CHECK_PRELUDE.format(marker=MARKER) + rewritten + driver
    return program, n


def call_program(candidate: str, fn_name: str, args: tuple[Any, ...] | list[Any]) -> str:
    """Program calling ``fn_name(*args)`` after ``candidate`` and printing the JSON result.

    The result line is ``MARKER + repr(result)``; the judge reads it back with
    ``ast.literal_eval`` (a result that is not a literal is compared by its ``repr``).
    """
    return candidate + _CALL_DRIVER.format(args=py_literal(list(args)), fn=fn_name, marker=MARKER)
