"""ragen_train (under construction)."""
