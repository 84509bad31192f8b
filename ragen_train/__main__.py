"""``python -m ragen_train`` = ``ragen-train`` (also what ``accelerate launch -m ragen_train`` runs)."""

from .cli import main

main()
