"""The data layer shared by data-backed environments (spec: ``docs/envs/data.md``).

* :mod:`.loaders` — local JSONL / JSON / parquet files, the Hugging Face hub, source specs;
* :mod:`.bundled` — the registry of small splits shipped in the env packages
  (``ragen_envs/envs/<key>/bundled/``), each with provenance;
* :mod:`.splits` — train / validation / test assignment, disjoint by construction;
* :mod:`.attempts` — multi-attempt scoring.

The base class of data-backed environments, with the seed semantics, is
:class:`ragen_envs.dataset_env.DatasetEnv`.

Importing this package imports no optional dependency (``pyarrow`` and ``datasets``
are imported only by the functions that need them).
"""

from __future__ import annotations

from .attempts import AttemptTracker
from .bundled import BundledDataset, bundled_info, list_bundled
from .loaders import (
    SOURCE_SPLIT_KEY,
    DataSourceError,
    MissingExtraError,
    load_bundled,
    load_hub,
    load_source,
    read_records,
)
from .splits import (
    LeakageError,
    SplitTable,
    assert_disjoint,
    canonical_key,
    normalize_text,
    partition,
)

__all__ = [
    "SOURCE_SPLIT_KEY",
    "AttemptTracker",
    "BundledDataset",
    "DataSourceError",
    "LeakageError",
    "MissingExtraError",
    "SplitTable",
    "assert_disjoint",
    "bundled_info",
    "canonical_key",
    "list_bundled",
    "load_bundled",
    "load_hub",
    "load_source",
    "normalize_text",
    "partition",
    "read_records",
]
