"""The code's shape, checked: transactions end in one place, the cluster client in one
package. (The import layers are checked by `lint-imports`, the query ban by ruff.)"""

from __future__ import annotations

import ast
from pathlib import Path

from app.runtime import JOBS

APP = Path(__file__).resolve().parent.parent / "app"


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(APP.rglob("*.py"))]


def test_only_the_unit_of_work_commits_or_rolls_back() -> None:
    """Services flush; the request's (or job's) unit of work commits."""
    found = [
        f"{path.relative_to(APP)}:{node.lineno} .{node.func.attr}()"
        for path, tree in _modules()
        if path.relative_to(APP) != Path("core/db.py")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("commit", "rollback")
    ]
    assert found == []


def test_only_the_kubernetes_adapter_imports_the_client() -> None:
    importers = {
        str(path.relative_to(APP))
        for path, tree in _modules()
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kubernetes")
        or (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] == "kubernetes" for a in node.names)
        )
    }
    assert importers
    assert all(name.startswith("adapters/k8s/") for name in importers), importers


def test_background_threads_are_loops_of_declared_jobs() -> None:
    """A periodic job is a `Job` in its domain's `jobs.py`, run by `core.jobs.Loop`: no
    other module starts a thread of its own (a worker pool for one pass is not a job)."""
    starters = {
        f"{path.relative_to(APP)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "Thread")
            or (isinstance(node.func, ast.Name) and node.func.id == "Thread")
        )
    }
    assert starters
    assert all(s.startswith("core/jobs.py:") for s in starters), starters
    declared = {p.parent.name for p in APP.glob("*/jobs.py")} - {"core"}  # core: the types

    assert {job.build.__module__.split(".")[1] for job in JOBS} == declared


SESSION_QUERIES = frozenset({"query", "get", "execute", "scalars", "scalar", "get_one"})


def test_sessions_are_queried_in_repositories_only() -> None:
    """ruff bans SQLAlchemy's query functions outside repositories; this covers what it
    cannot see: a session's own query methods (``session.query(...)``,
    ``session.get(...)``, ``session.execute(...)``)."""
    found = [
        f"{path.relative_to(APP)}:{node.lineno} session.{node.func.attr}()"
        for path, tree in _modules()
        if path.name != "repository.py"
        and path.relative_to(APP) not in (Path("core/db.py"), Path("core/together.py"))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SESSION_QUERIES
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "session"
    ]
    assert found == []
