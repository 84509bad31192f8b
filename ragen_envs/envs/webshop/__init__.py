"""WebShop: search, browse and buy what the instruction asks (spec: ``docs/envs/webshop.md``).

Modules, one job each:

* :mod:`.products` - products, goals and the shared tokeniser;
* :mod:`.vocab` - the word lists of the generated catalogue;
* :mod:`.catalog` - the generated catalogue and its goals;
* :mod:`.original` - loading the original WebShop files;
* :mod:`.engine` - the shop: search (BM25), result pages, item pages;
* :mod:`.reward` - the published WebShop reward;
* :mod:`.env` - :class:`WebShopEnv`, the environment;
* :mod:`.register` - the ``register_env`` calls.

``config.schema.json`` and ``info.schema.json`` are the schemas.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["WebShopEnv", "parse_shop_action"],
    },
)
