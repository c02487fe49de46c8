"""The build's one addition to pyproject.toml: the files the suite reads go into the package.

The repository keeps `manifests/` and the Go modules `controlplane/` and `epp/`
at its top level; a wheel carries them under `conformance/_data/`, where
`conformance.data` finds them (`MANIFEST.in` puts them in the sdist, so a wheel
built from the sdist has them too). An editable install copies nothing: it reads
the checkout's own files.
"""

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# Loaded by path: the build must not import the package (nor its dependencies).
DATA = runpy.run_path(str(HERE / "conformance" / "data.py"))
TARGET = Path("conformance") / "_data"


class BuildPyWithData(build_py):
    def _data_files(self) -> list[tuple[Path, Path]]:
        if getattr(self, "editable_mode", False):
            return []
        return [(HERE / rel, Path(self.build_lib) / TARGET / rel) for rel in DATA["shipped"](HERE)]

    def run(self) -> None:
        super().run()
        for src, dest in self._data_files():
            self.mkpath(str(dest.parent))
            self.copy_file(str(src), str(dest), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return super().get_outputs(include_bytecode) + [str(dest) for _, dest in self._data_files()]


setup(cmdclass={"build_py": BuildPyWithData})
