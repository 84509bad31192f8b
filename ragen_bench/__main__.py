"""``python -m ragen_bench`` = ``ragen-bench``."""

from .cli import main

main()
