"""Build hook for the two-rooted source tree (ADR 013): what hatchling cannot say in configuration.

* An editable install puts ``core/`` on ``sys.path`` (``dev-mode-dirs``, written to
  ``_alkstore.pth``) and, through a second file that sorts after it, ``adapters/``: the order
  matters, because ``core/alkstore`` is the package and ``adapters/alkstore`` only its other half.
* Every wheel names its one top-level package in ``top_level.txt``, as setuptools-built ones do,
  for the tools that read it (``importlib.metadata.packages_distributions`` among them).
* The sync runtime's twins are generated from their async source by ``tools/async_to_sync.py`` and
  committed (ADR 026, ADR 059): a wheel takes them as they are in the tree, like any module, and
  the test session and CI refuse a tree where one is stale.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: Sorts after hatchling's ``_alkstore.pth``; site.py reads .pth files in name order.
ADAPTERS_PTH = "alkstore_adapters.pth"


def load_generator(root: Path) -> ModuleType:
    """``tools/async_to_sync.py`` of the tree at ``root``, loaded by path (it is no package), for the tests."""
    spec = importlib.util.spec_from_file_location("alkstore_async_to_sync", root / "tools" / "async_to_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LayoutHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds the adapters' ``.pth`` to editable wheels and ``top_level.txt`` to every wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix="alkstore-build-"))
        top_level = self._scratch / "top_level.txt"
        top_level.write_text("alkstore\n", encoding="utf-8")
        dist_info = f"{self.metadata.core.name}-{self.metadata.version}.dist-info"
        build_data["force_include"][str(top_level)] = f"{dist_info}/top_level.txt"
        if version == "editable":
            pth = self._scratch / ADAPTERS_PTH
            pth.write_text(str(Path(self.root, "adapters").resolve()) + "\n", encoding="utf-8")
            build_data["force_include_editable"][str(pth)] = ADAPTERS_PTH
            build_data["force_include_editable"][str(top_level)] = f"{dist_info}/top_level.txt"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
