"""Stdin/stdout programming problems written by the ragen authors (MIT).

Source of the bundled ``code-stdio-ours`` split (``python scripts/build_bundled.py``).
Each :class:`StdioProblem` has a statement, a reference program (the oracle's answer),
two example inputs and a generator of further inputs; the expected outputs are computed
by a separate Python function (``solve``), not by running the reference program, so
the reference program is checked against an independent implementation when the tests
run in the sandbox (``tests/envs/test_deepcoder.py``).
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...seeding import derive_seed

__all__ = ["PROBLEMS", "StdioProblem", "build_records"]


@dataclass(frozen=True)
class StdioProblem:
    """A problem: ``solve`` maps an input text to the expected output text."""

    slug: str
    statement: str
    reference: str
    examples: tuple[str, ...]
    make_input: Callable[[np.random.Generator], str]
    solve: Callable[[str], str]


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split()]


def _r(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _word(rng: np.random.Generator, alphabet: str, lo: int, hi: int) -> str:
    return "".join(alphabet[_r(rng, 0, len(alphabet) - 1)] for _ in range(_r(rng, lo, hi)))


PROBLEMS: tuple[StdioProblem, ...] = (
    StdioProblem(
        "pair-sums",
        "The first line holds T. Each of the next T lines holds two integers a and b. "
        "For every line print a + b on its own line.",
        "import sys\ndata = sys.stdin.read().split()\nt = int(data[0])\nfor i in range(t):\n"
        "    print(int(data[1 + 2 * i]) + int(data[2 + 2 * i]))\n",
        ("2\n1 2\n10 -4\n", "1\n0 0\n"),
        lambda g: (
            f"{(t := _r(g, 1, 6))}\n"
            + "".join(f"{_r(g, -(10**9), 10**9)} {_r(g, -(10**9), 10**9)}\n" for _ in range(t))
        ),
        lambda s: "\n".join(str(a + b) for a, b in zip(_ints(s)[1::2], _ints(s)[2::2])) + "\n",
    ),
    StdioProblem(
        "max-subarray",
        "The first line holds n (1 <= n <= 10^5), the second n integers. Print the largest sum of a "
        "non-empty contiguous run of the numbers.",
        "n = int(input())\na = list(map(int, input().split()))\nbest = cur = a[0]\nfor x in a[1:]:\n"
        "    cur = max(x, cur + x)\n    best = max(best, cur)\nprint(best)\n",
        ("5\n-2 3 -1 4 -10\n", "3\n-5 -1 -7\n"),
        lambda g: (
            f"{(n := _r(g, 1, 30))}\n" + " ".join(str(_r(g, -50, 50)) for _ in range(n)) + "\n"
        ),
        lambda s: (
            str(
                max(
                    sum(_ints(s)[1:][i:j])
                    for i in range(_ints(s)[0])
                    for j in range(i + 1, _ints(s)[0] + 1)
                )
            )
            + "\n"
        ),
    ),
    StdioProblem(
        "count-vowels",
        "Read one line of text and print how many of its characters are vowels (a, e, i, o, u, in "
        "either case).",
        "line = input()\nprint(sum(ch in 'aeiouAEIOU' for ch in line))\n",
        ("Hello World\n", "xyz\n"),
        lambda g: " ".join(_word(g, "abcdeiouxyzAEIOUQ", 1, 8) for _ in range(_r(g, 1, 6))) + "\n",
        lambda s: str(sum(ch in "aeiouAEIOU" for ch in s.split("\n")[0])) + "\n",
    ),
    StdioProblem(
        "reverse-words",
        "Read one line of words separated by single spaces and print the words in reverse order, "
        "separated by single spaces.",
        "print(' '.join(reversed(input().split())))\n",
        ("the quick brown fox\n", "solo\n"),
        lambda g: " ".join(_word(g, "abcdefghij", 1, 6) for _ in range(_r(g, 1, 7))) + "\n",
        lambda s: " ".join(s.split()[::-1]) + "\n",
    ),
    StdioProblem(
        "gcd-lcm",
        "Read two positive integers a and b (at most 10^12) and print their greatest common divisor and "
        "their least common multiple, separated by a space.",
        "a, b = map(int, input().split())\nx, y = a, b\nwhile y:\n    x, y = y, x % y\nprint(x, a // x * b)\n",
        ("12 18\n", "7 5\n"),
        lambda g: f"{_r(g, 1, 10**6)} {_r(g, 1, 10**6)}\n",
        lambda s: f"{math.gcd(*_ints(s))} {math.lcm(*_ints(s))}\n",
    ),
    StdioProblem(
        "count-primes",
        "Read an integer n (1 <= n <= 10^6) and print how many prime numbers are at most n.",
        "n = int(input())\nsieve = bytearray([1]) * (n + 1)\nsieve[0:2] = b'\\x00\\x00'[: n + 1]\n"
        "for i in range(2, int(n ** 0.5) + 1):\n    if sieve[i]:\n"
        "        sieve[i * i :: i] = bytearray(len(range(i * i, n + 1, i)))\nprint(sum(sieve))\n",
        ("10\n", "1\n"),
        lambda g: f"{_r(g, 1, 5000)}\n",
        lambda s: (
            str(
                sum(
                    all(k % d for d in range(2, int(k**0.5) + 1)) for k in range(2, _ints(s)[0] + 1)
                )
            )
            + "\n"
        ),
    ),
    StdioProblem(
        "circle-area",
        "Read a radius r (a real number) and print the area of a circle of that radius. Answers within an "
        "absolute or relative error of 1e-6 are accepted.",
        "import math\nr = float(input())\nprint(f'{math.pi * r * r:.9f}')\n",
        ("1\n", "2.5\n"),
        lambda g: f"{_r(g, 1, 2000) / 100}\n",
        lambda s: f"{math.pi * float(s) ** 2:.6f}\n",
    ),
    StdioProblem(
        "balanced-brackets",
        "Read a string of the characters ()[]{} and print YES if its brackets are balanced and properly "
        "nested, otherwise NO.",
        "s = input().strip()\npairs = {')': '(', ']': '[', '}': '{'}\nstack = []\nok = True\nfor ch in s:\n"
        "    if ch in '([{':\n        stack.append(ch)\n    elif not stack or stack.pop() != pairs[ch]:\n"
        "        ok = False\n        break\nprint('YES' if ok and not stack else 'NO')\n",
        ("([]{})\n", "([)]\n"),
        lambda g: _word(g, "()[]{}", 1, 12) + "\n",
        lambda s: _balanced(s.strip()) + "\n",
    ),
    StdioProblem(
        "fizz-count",
        "Read n (1 <= n <= 10^18) and print how many integers from 1 to n are divisible by 3 or by 5.",
        "n = int(input())\nprint(n // 3 + n // 5 - n // 15)\n",
        ("15\n", "2\n"),
        lambda g: f"{_r(g, 1, 10**6)}\n",
        lambda s: str(sum(1 for k in range(1, _ints(s)[0] + 1) if k % 3 == 0 or k % 5 == 0)) + "\n",
    ),
    StdioProblem(
        "transpose",
        "The first line holds r and c. The next r lines hold c integers each. Print the transposed matrix: "
        "c lines of r integers separated by spaces.",
        "r, c = map(int, input().split())\nm = [input().split() for _ in range(r)]\nfor j in range(c):\n"
        "    print(' '.join(m[i][j] for i in range(r)))\n",
        ("2 3\n1 2 3\n4 5 6\n", "1 1\n7\n"),
        lambda g: _matrix(g),
        lambda s: _transpose(s),
    ),
    StdioProblem(
        "second-largest",
        "The first line holds n, the second n integers. Print the second largest distinct value, or NONE "
        "if all values are equal.",
        "input()\nvals = sorted(set(map(int, input().split())))\nprint(vals[-2] if len(vals) > 1 else 'NONE')\n",
        ("5\n4 1 4 3 2\n", "3\n7 7 7\n"),
        lambda g: f"{(n := _r(g, 1, 8))}\n" + " ".join(str(_r(g, 1, 6)) for _ in range(n)) + "\n",
        lambda s: (
            (str(sorted(set(_ints(s)[1:]))[-2]) if len(set(_ints(s)[1:])) > 1 else "NONE") + "\n"
        ),
    ),
    StdioProblem(
        "run-length",
        "Read a non-empty string of lowercase letters and print its run-length encoding: each maximal run "
        "of one letter written as the letter followed by the run length (aaabcc -> a3b1c2).",
        "s = input().strip()\nout = []\ni = 0\nwhile i < len(s):\n    j = i\n    while j < len(s) and s[j] == s[i]:\n"
        "        j += 1\n    out.append(f'{s[i]}{j - i}')\n    i = j\nprint(''.join(out))\n",
        ("aaabcc\n", "z\n"),
        lambda g: _word(g, "aab", 1, 15) + "\n",
        lambda s: _rle(s.strip()) + "\n",
    ),
    StdioProblem(
        "anagrams",
        "Read two words on one line and print YES if one is an anagram of the other (same letters, same "
        "counts), otherwise NO.",
        "a, b = input().split()\nprint('YES' if sorted(a) == sorted(b) else 'NO')\n",
        ("listen silent\n", "abc abd\n"),
        lambda g: (
            lambda w: (
                f"{w} {''.join(sorted(w)) if _r(g, 0, 1) else _word(g, 'abc', len(w), len(w))}\n"
            )
        )(_word(g, "abc", 1, 6)),
        lambda s: ("YES" if sorted(s.split()[0]) == sorted(s.split()[1]) else "NO") + "\n",
    ),
    StdioProblem(
        "digital-root",
        "Read a non-negative integer with up to 10^5 digits. Repeatedly replace it by the sum of its digits "
        "until one digit remains, and print that digit.",
        "s = input().strip()\nwhile len(s) > 1:\n    s = str(sum(int(ch) for ch in s))\nprint(s)\n",
        ("9875\n", "0\n"),
        lambda g: (_word(g, "0123456789", 1, 40).lstrip("0") or "0") + "\n",
        lambda s: _digital_root(s.strip()) + "\n",
    ),
    StdioProblem(
        "min-stairs-cost",
        "The first line holds n (2 <= n), the second n costs. You start below step 0 or step 1 and may climb "
        "one or two steps at a time, paying the cost of each step you stand on. Print the least total cost to "
        "get past the last step.",
        "n = int(input())\nc = list(map(int, input().split()))\na, b = c[0], c[1]\nfor x in c[2:]:\n"
        "    a, b = b, min(a, b) + x\nprint(min(a, b))\n",
        ("3\n10 15 20\n", "4\n1 100 1 1\n"),
        lambda g: f"{(n := _r(g, 2, 10))}\n" + " ".join(str(_r(g, 0, 30)) for _ in range(n)) + "\n",
        lambda s: str(_stairs(_ints(s)[1:])) + "\n",
    ),
    StdioProblem(
        "merge-intervals",
        "The first line holds n, then n lines hold intervals l r (l <= r). Print the number of disjoint "
        "intervals after merging overlapping or touching ones, and their total length, separated by a space.",
        "n = int(input())\niv = sorted(tuple(map(int, input().split())) for _ in range(n))\nmerged = []\n"
        "for l, r in iv:\n    if merged and l <= merged[-1][1]:\n        merged[-1][1] = max(merged[-1][1], r)\n"
        "    else:\n        merged.append([l, r])\nprint(len(merged), sum(r - l for l, r in merged))\n",
        ("3\n1 3\n2 6\n8 10\n", "2\n1 2\n2 4\n"),
        lambda g: _intervals(g),
        lambda s: _merge(s),
    ),
    StdioProblem(
        "to-binary",
        "Read a non-negative integer n (at most 10^18) and print it in base 2 without leading zeros.",
        "n = int(input())\nprint(bin(n)[2:])\n",
        ("10\n", "0\n"),
        lambda g: f"{_r(g, 0, 10**9)}\n",
        lambda s: _binary(_ints(s)[0]) + "\n",
    ),
    StdioProblem(
        "clean-palindrome",
        "Read one line. Ignoring every character that is not a letter or digit, and ignoring case, print "
        "YES if it reads the same backwards, otherwise NO.",
        "s = [ch.lower() for ch in input() if ch.isalnum()]\nprint('YES' if s == s[::-1] else 'NO')\n",
        ("A man, a plan, a canal: Panama\n", "race a car\n"),
        lambda g: (lambda w: (w + w[::-1] if _r(g, 0, 1) else w) + "\n")(_word(g, "abAB, ", 1, 6)),
        lambda s: (
            (
                "YES"
                if (t := [c.lower() for c in s.split("\n")[0] if c.isalnum()]) == t[::-1]
                else "NO"
            )
            + "\n"
        ),
    ),
    StdioProblem(
        "coin-ways",
        "The first line holds an amount A and a count k, the second k distinct coin values. Print the number "
        "of ways to make A from unlimited coins (order does not matter), modulo 1000000007.",
        "a, k = map(int, input().split())\ncoins = list(map(int, input().split()))\nways = [1] + [0] * a\n"
        "for c in coins:\n    for v in range(c, a + 1):\n        ways[v] = (ways[v] + ways[v - c]) % 1000000007\n"
        "print(ways[a])\n",
        ("5 3\n1 2 5\n", "3 1\n2\n"),
        lambda g: (lambda cs: f"{_r(g, 0, 40)} {len(cs)}\n{' '.join(map(str, cs))}\n")(
            sorted(set(_r(g, 1, 9) for _ in range(_r(g, 1, 4))))
        ),
        lambda s: str(_coin_ways(_ints(s)[0], _ints(s)[2:])) + "\n",
    ),
    StdioProblem(
        "grid-path",
        "The first line holds h and w, then h lines of w characters: '.' free, '#' wall, one 'S' and one 'E'. "
        "Moving up, down, left or right between free cells, print the fewest moves from S to E, or -1.",
        "from collections import deque\nh, w = map(int, input().split())\ng = [input() for _ in range(h)]\n"
        "for i in range(h):\n    for j in range(w):\n        if g[i][j] == 'S':\n            s = (i, j)\n"
        "dist = {s: 0}\nq = deque([s])\nans = -1\nwhile q:\n    i, j = q.popleft()\n    if g[i][j] == 'E':\n"
        "        ans = dist[(i, j)]\n        break\n    for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n"
        "        a, b = i + di, j + dj\n        if 0 <= a < h and 0 <= b < w and g[a][b] != '#' and (a, b) not in dist:\n"
        "            dist[(a, b)] = dist[(i, j)] + 1\n            q.append((a, b))\nprint(ans)\n",
        ("3 4\nS..#\n.#..\n...E\n", "2 2\nS#\n#E\n"),
        lambda g: _grid(g),
        lambda s: str(_grid_path(s)) + "\n",
    ),
    StdioProblem(
        "kth-smallest",
        "The first line holds n and k, the second n integers. Print the k-th smallest of them (k counts from 1, "
        "duplicates count separately).",
        "n, k = map(int, input().split())\nprint(sorted(map(int, input().split()))[k - 1])\n",
        ("5 2\n9 1 8 1 7\n", "1 1\n-3\n"),
        lambda g: (
            lambda n: (
                f"{n} {_r(g, 1, n)}\n" + " ".join(str(_r(g, -20, 20)) for _ in range(n)) + "\n"
            )
        )(_r(g, 1, 9)),
        lambda s: str(sorted(_ints(s)[2:])[_ints(s)[1] - 1]) + "\n",
    ),
    StdioProblem(
        "mean-of-list",
        "The first line holds n, the second n integers. Print their arithmetic mean. Answers within an "
        "absolute or relative error of 1e-6 are accepted.",
        "n = int(input())\nprint(sum(map(int, input().split())) / n)\n",
        ("4\n1 2 3 5\n", "3\n-1 -1 -2\n"),
        lambda g: (
            f"{(n := _r(g, 1, 9))}\n" + " ".join(str(_r(g, -100, 100)) for _ in range(n)) + "\n"
        ),
        lambda s: f"{sum(_ints(s)[1:]) / _ints(s)[0]:.10f}\n",
    ),
)


def _balanced(s: str) -> str:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pairs[ch]:
            return "NO"
    return "NO" if stack else "YES"


def _matrix(g: np.random.Generator) -> str:
    r, c = _r(g, 1, 4), _r(g, 1, 4)
    return f"{r} {c}\n" + "".join(
        " ".join(str(_r(g, -9, 9)) for _ in range(c)) + "\n" for _ in range(r)
    )


def _transpose(s: str) -> str:
    lines = s.strip().split("\n")
    r, c = map(int, lines[0].split())
    m = [ln.split() for ln in lines[1 : 1 + r]]
    return "".join(" ".join(m[i][j] for i in range(r)) + "\n" for j in range(c))


def _rle(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return "".join(out)


def _digital_root(s: str) -> str:
    n = sum(int(ch) for ch in s)
    if len(s) == 1:
        return s
    return "0" if n == 0 else str(1 + (n - 1) % 9)


def _stairs(c: list[int]) -> int:
    n = len(c)
    best = [0] * (n + 1)
    for i in range(2, n + 1):
        best[i] = min(best[i - 1] + c[i - 1], best[i - 2] + c[i - 2])
    return best[n]


def _intervals(g: np.random.Generator) -> str:
    n = _r(g, 1, 6)
    rows = []
    for _ in range(n):
        left = _r(g, 0, 20)
        rows.append(f"{left} {left + _r(g, 0, 6)}")
    return f"{n}\n" + "\n".join(rows) + "\n"


def _merge(s: str) -> str:
    v = _ints(s)
    points = sorted((v[1 + 2 * i], v[2 + 2 * i]) for i in range(v[0]))
    # Sweep in order of left end; an interval starting at or before the current end joins it
    # (the input has at least one interval).
    (cur_start, cur_end), comps, total = points[0], 1, 0
    for left, right in points[1:]:
        if left > cur_end:
            total += cur_end - cur_start
            comps, cur_start, cur_end = comps + 1, left, right
        else:
            cur_end = max(cur_end, right)
    total += cur_end - cur_start
    return f"{comps} {total}\n"


def _binary(n: int) -> str:
    if n == 0:
        return "0"
    digits = []
    while n:
        digits.append(str(n & 1))
        n >>= 1
    return "".join(reversed(digits))


def _coin_ways(a: int, coins: list[int]) -> int:

    @functools.cache
    def ways(amount: int, i: int) -> int:
        if amount == 0:
            return 1
        if i == len(coins) or amount < 0:
            return 0
        return ways(amount - coins[i], i) + ways(amount, i + 1)

    return ways(a, 0) % 1000000007


def _grid(g: np.random.Generator) -> str:
    h, w = _r(g, 2, 6), _r(g, 2, 6)
    cells = [["#" if _r(g, 0, 3) == 0 else "." for _ in range(w)] for _ in range(h)]
    free = [(i, j) for i in range(h) for j in range(w)]
    a = free[_r(g, 0, len(free) - 1)]
    b = free[_r(g, 0, len(free) - 1)]
    if a == b:
        b = free[(free.index(a) + 1) % len(free)]
    cells[a[0]][a[1]], cells[b[0]][b[1]] = "S", "E"
    return f"{h} {w}\n" + "".join("".join(row) + "\n" for row in cells)


def _grid_path(s: str) -> int:
    lines = s.strip().split("\n")
    h, w = map(int, lines[0].split())
    g = lines[1 : 1 + h]
    start = next((i, j) for i in range(h) for j in range(w) if g[i][j] == "S")
    seen, frontier, steps = {start}, deque([(start, 0)]), -1
    while frontier:
        (i, j), d = frontier.popleft()
        if g[i][j] == "E":
            steps = d
            break
        for a, b in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
            if 0 <= a < h and 0 <= b < w and g[a][b] != "#" and (a, b) not in seen:
                seen.add((a, b))
                frontier.append(((a, b), d + 1))
    return steps


def build_records(n_random: int = 4, seed: int = 0) -> list[dict]:
    """Records (format ``ragen``) of every problem: 2 example tests + ``n_random`` generated ones.

    Generated inputs use ``numpy.random.default_rng(derive_seed("code-stdio", seed, slug, j))``.
    """
    records = []
    for p in PROBLEMS:
        inputs = list(p.examples)
        for j in range(n_random):
            inputs.append(
                p.make_input(np.random.default_rng(derive_seed("code-stdio", seed, p.slug, j)))
            )
        tests = [{"input": i, "output": p.solve(i)} for i in inputs]
        example = tests[0]
        prompt = (
            f"{p.statement}\n\nExample input:\n{example['input']}\nExample output:\n{example['output']}\n"
            "Write a Python 3 program that reads standard input and writes standard output."
        )
        records.append(
            {
                "id": f"ragen-stdio/{p.slug}",
                "source": "ragen",
                "prompt": prompt,
                "tests": tests,
                "reference_solution": p.reference,
            }
        )
    return records
