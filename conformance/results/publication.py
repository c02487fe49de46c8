"""Check a `reports/` tree before it is published (`python -m conformance check-reports reports/`).

The layout (see reports/README.md):

    reports/<extension version>/<profile>/<implementation>/
        README.md                                   a table of the reports, and a "Reproduce" section
        <impl. version>-<mode>-<profile>-report.yaml  the suite's report, uploaded unmodified

`check_tree` returns one line per problem; none means the tree may be published.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from . import report

PROFILE_DIRS = {report.PROFILE_GATEWAY.lower(): report.PROFILE_GATEWAY}
IGNORED_TOP = {"out", "README.md"}  # run results (gitignored) and the rules themselves
README_COLUMNS = ("extension version", "profile", "implementation version", "mode", "report")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def check_report_file(path: Path, extension_version: str | None = None, profile: str | None = None) -> list[str]:
    """Problems with one report file, as `<file>: <problem>` lines without the file prefix."""
    try:
        text = path.read_text()
    except OSError as e:
        return [f"cannot read it: {e.strerror}"]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"not valid YAML: {str(e).splitlines()[0]}"]
    problems = report.validate(doc)
    if problems:
        return problems
    for key in ("gatewayAPIVersion", "gatewayAPIChannel", report.EXTENSION_VERSION_KEY):
        if doc[key] == "unknown":
            problems.append(f"{key} is unknown: that run never read it from the cluster; publish a run that did")
    if text != report.dump(doc):
        problems.append("not as the suite wrote it (keys, order or formatting changed); upload the file unmodified")
    expected = report.file_name(doc)
    if path.name != expected:
        problems.append(f"file name should be {expected} (<implementation version>-<mode>-<profile>-report.yaml)")
    if extension_version is not None and doc[report.EXTENSION_VERSION_KEY] != extension_version:
        problems.append(f"{report.EXTENSION_VERSION_KEY} is {doc[report.EXTENSION_VERSION_KEY]}, "
                        f"but the folder is {extension_version}")
    if profile is not None and [p["name"] for p in doc["profiles"]] != [profile]:
        names = ", ".join(p["name"] for p in doc["profiles"])
        problems.append(f"profiles are {names}, but the folder is for {profile}")
    return problems


def _table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """The first markdown table whose header has the README columns: (header, rows)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = _cells(line)
        if cells and all(c in [x.lower() for x in cells] for c in README_COLUMNS):
            rows = []
            for row in lines[i + 2:]:
                if not row.strip().startswith("|"):
                    break
                rows.append(_cells(row))
            return [c.lower() for c in cells], rows
    return None


def _cells(line: str) -> list[str]:
    line = line.strip()
    if not line.startswith("|"):
        return []
    return [c.strip() for c in line.strip("|").split("|")]


def check_readme(folder: Path, reports: dict[str, dict | None]) -> list[str]:
    """Problems with an implementation folder's README.md, given its reports (file name -> parsed doc)."""
    # Each problem is worded to follow "<folder>/README.md: ".
    path = folder / "README.md"
    if not path.is_file():
        return ["is missing"]
    text = path.read_text()
    problems = []
    table = _table(text)
    if table is None:
        problems.append(f"has no table with the columns {', '.join(README_COLUMNS)}")
        linked: list[str] = []
    else:
        header, rows = table
        linked = []
        for n, row in enumerate(rows, 1):
            cell = dict(zip(header, row, strict=False))
            m = _LINK.search(cell.get("report", ""))
            if not m:
                problems.append(f"table row {n}: the report column has no link")
                continue
            target = m.group(1).removeprefix("./")
            linked.append(target)
            if "/" in target or not (folder / target).is_file():
                problems.append(f"table row {n}: links {m.group(1)}, which is not a report in this folder")
                continue
            doc = reports.get(target)
            if doc is None:
                continue
            expected = {"extension version": doc[report.EXTENSION_VERSION_KEY],
                        "profile": ", ".join(p["name"] for p in doc["profiles"]),
                        "implementation version": doc["implementation"]["version"], "mode": doc["mode"]}
            for column, value in expected.items():
                if cell.get(column, "").strip("` ").lower() != str(value).lower():
                    problems.append(f"table row {n}: {column} is {cell.get(column, '')!r}, "
                                    f"the report says {value!r}")
    for name in sorted(reports):
        if linked.count(name) != 1:
            problems.append(f"table links {name} {linked.count(name)} times; link each report once")
    if not re.search(r"^#+\s*Reproduce\b", text, re.M | re.I):
        problems.append("has no \"Reproduce\" section (a heading, then how to run the suite again)")
    else:
        section = re.split(r"^#+\s*Reproduce\b.*$", text, maxsplit=1, flags=re.M | re.I)[1]
        body = re.split(r"^#+\s", section, maxsplit=1, flags=re.M)[0]
        if "```" not in body:
            problems.append("the \"Reproduce\" section has no command block")
    return problems


def check_implementation(folder: Path, root: Path, extension_version: str, profile: str) -> list[str]:
    problems = []
    reports: dict[str, dict | None] = {}
    for path in sorted(folder.iterdir()):
        where = _rel(path, root)
        if path.name == "README.md":
            continue
        if path.is_dir() or not path.name.endswith("-report.yaml"):
            problems.append(f"{where}: unexpected; an implementation folder holds README.md and *-report.yaml only")
            continue
        found = check_report_file(path, extension_version, profile)
        problems += [f"{where}: {p}" for p in found]
        reports[path.name] = None if found else yaml.safe_load(path.read_text())
    if not reports:
        problems.append(f"{_rel(folder, root)}: no *-report.yaml")
    problems += [f"{_rel(folder / 'README.md', root)}: {p}" for p in check_readme(folder, reports)]
    return problems


def check_tree(root: Path) -> list[str]:
    """Every problem in a reports tree (reports/<extension version>/<profile>/<implementation>/)."""
    if not root.is_dir():
        return [f"{root}: not a directory"]
    problems = []
    found = 0
    for version_dir in sorted(root.iterdir()):
        if version_dir.name in IGNORED_TOP or version_dir.name.startswith("."):
            continue
        if not version_dir.is_dir():
            problems.append(f"{_rel(version_dir, root)}: unexpected file; expected <extension version>/ folders")
            continue
        if not report.is_token(version_dir.name) or not version_dir.name.startswith("v"):
            problems.append(f"{_rel(version_dir, root)}: not an extension version (e.g. v0.3.0)")
        for profile_dir in sorted(version_dir.iterdir()):
            if profile_dir.name not in PROFILE_DIRS or not profile_dir.is_dir():
                problems.append(f"{_rel(profile_dir, root)}: unexpected; expected a profile folder "
                                f"({', '.join(PROFILE_DIRS)})")
                continue
            for impl_dir in sorted(profile_dir.iterdir()):
                if not impl_dir.is_dir():
                    problems.append(f"{_rel(impl_dir, root)}: unexpected file; expected <implementation>/ folders")
                    continue
                found += 1
                problems += check_implementation(impl_dir, root, version_dir.name, PROFILE_DIRS[profile_dir.name])
    if not found and not problems:
        problems.append(f"{root}: no reports/<extension version>/<profile>/<implementation>/ folder")
    return problems
