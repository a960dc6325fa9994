"""Build hook for the two-rooted source tree (ADR 013): what hatchling cannot say in configuration.

* An editable install puts ``core/`` on ``sys.path`` (``dev-mode-dirs``, written to
  ``_alkstore.pth``) and, through a second file that sorts after it, ``adapters/``: the order
  matters, because ``core/alkstore`` is the package and ``adapters/alkstore`` only its other half.
* Every wheel names its one top-level package in ``top_level.txt``, as setuptools-built ones do,
  for the tools that read it (``importlib.metadata.packages_distributions`` among them).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: Sorts after hatchling's ``_alkstore.pth``; site.py reads .pth files in name order.
ADAPTERS_PTH = "alkstore_adapters.pth"


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
