"""Build hook for the two-rooted source tree (ADR 013): what hatchling cannot say in configuration.

* An editable install puts ``core/`` on ``sys.path`` (``dev-mode-dirs``, written to
  ``_alkstore.pth``) and, through a second file that sorts after it, ``adapters/``: the order
  matters, because ``core/alkstore`` is the package and ``adapters/alkstore`` only its other half.
* Every wheel names its one top-level package in ``top_level.txt``, as setuptools-built ones do,
  for the tools that read it (``importlib.metadata.packages_distributions`` among them).
* The sync runtime is generated from its async source (ADR 026, ``.ci/async_to_sync.py``): a
  wheel gets the twins made afresh from the sources it is built from (never committed, so never
  stale), and an editable install writes them into the tree, where the tools look.
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
#: Where a source tree's path lands in the wheel: both halves join in one ``alkstore`` (ADR 013).
_WHEEL_ROOTS = {"core/alkstore": "alkstore", "adapters/alkstore": "alkstore"}


def load_generator(root: Path) -> ModuleType:
    """``.ci/async_to_sync.py`` of the tree at ``root``, loaded by path (it is no package); the tests load it so too."""
    spec = importlib.util.spec_from_file_location("alkstore_async_to_sync", root / ".ci" / "async_to_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_wheel(relative: str) -> str:
    for tree, package in _WHEEL_ROOTS.items():
        if relative.startswith(tree + "/"):
            return package + relative[len(tree) :]
    raise ValueError(f"{relative} is in neither half of the package")


class LayoutHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds the adapters' ``.pth`` to editable wheels and ``top_level.txt`` to every wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix="alkstore-build-"))
        root = Path(self.root)
        generator = load_generator(root)
        if version == "editable":
            generator.write(root)  # into the tree: the editable install imports it from there
        else:
            generated = self._scratch / "generated"
            generator.write(root, generated)
            for target in generator.render(root):
                relative = target.relative_to(root).as_posix()
                build_data["force_include"][str(generated / relative)] = _in_wheel(relative)
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
