"""mkdocs hooks (mkdocs.yml ``hooks:``): the README becomes the docs home page.

``docs/index.md`` holds the marker ``<!-- include-readme -->``; it is replaced by
``README.md`` with its links rewritten for the site: ``docs/X`` becomes ``X`` (a page of
the site, checked by ``mkdocs build --strict``), and a link to any other file of the
repository becomes a link to that file at ``repo_url`` (it is not part of the site).
"""

from __future__ import annotations

import re
from pathlib import Path

MARKER = "<!-- include-readme -->"
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")


def readme_for_site(text: str, repo_url: str) -> str:
    """``README.md`` text with links rewritten as described in the module docstring."""

    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        if target.startswith("docs/"):
            return m.group(1) + target[len("docs/") :] + m.group(3)
        kind = "tree" if target.endswith("/") else "blob"
        return m.group(1) + f"{repo_url.rstrip('/')}/{kind}/main/{target.lstrip('./')}" + m.group(3)

    return _LINK.sub(fix, text)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: D103 - mkdocs hook
    if MARKER not in markdown:
        return markdown
    root = Path(config["config_file_path"]).parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    return markdown.replace(MARKER, readme_for_site(readme, config.get("repo_url") or ""))
