"""`dna` starts with only the base dependencies of pyproject.toml (no extra: no dev, onnx, bench).

A fresh venv (``python -m venv --without-pip``) sees exactly the distributions that the base
``[project] dependencies`` require, transitively (markers evaluated), linked from this test
environment's site-packages, plus the checkout's ``pydna``. Nothing is downloaded: it runs as fast
and as offline as the rest of the suite. A module imported by the CLI but not declared (``click``
before it was) makes ``dna --help`` fail here.
"""
from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def _closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions the requirements need, transitively (markers evaluated with the
    extras asked for: ``psycopg[binary]`` brings psycopg-binary, ``rich`` no jupyter), by name."""
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = (req.name.lower().replace("_", "-"), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(req.name)
        found[key[0]] = dist
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return found


def _top_levels(dist: metadata.Distribution) -> set[str]:
    names = set()
    for f in dist.files or []:
        part = f.parts[0]
        if part in ("..", "__pycache__") or part.endswith(".pth") or part == "bin":
            continue
        names.add(part)
    return names


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    here = Path(sysconfig.get_paths()["purelib"])
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    linked = root / "linked"
    linked.mkdir()
    for dist in _closure(deps).values():
        for name in _top_levels(dist):
            source = here / name
            if source.exists() and not (linked / name).exists():
                (linked / name).symlink_to(source)
    (linked / "pydna").symlink_to(REPO / "pydna")
    (site / "base-deps.pth").write_text(f"{linked}\n", encoding="utf-8")
    return venv


def _run(venv: Path, *args: str, code: str = "from pydna.cli import main; main()") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["DNA_HOME"] = str(venv.parent / "dna-home")
    return subprocess.run([str(venv / "bin" / "python"), "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=venv.parent, timeout=180)


def test_the_venv_holds_only_the_base_dependencies(base_venv):
    probe = _run(base_venv, code="import importlib.util as u; print([m for m in ('pytest', 'numpy', 'onnxruntime', "
                                  "'tokenizers', 'hypothesis', 'typer', 'psycopg', 'alembic') if u.find_spec(m)])")
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "['typer', 'psycopg', 'alembic']"


@pytest.mark.parametrize("args", [["--help"], ["db", "--help"], ["index", "--help"], ["recall", "--help"],
                                  ["scopes", "--help"], ["memory", "--help"], ["memory", "remember", "--help"]])
def test_dna_starts_with_the_base_dependencies(base_venv, args):
    result = _run(base_venv, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Usage" in result.stdout and "Traceback" not in result.stderr


def test_dna_db_upgrade_sql_runs_with_the_base_dependencies(base_venv):
    result = _run(base_venv, "db", "upgrade", "--sql")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "CREATE SCHEMA IF NOT EXISTS dna" in result.stdout


def test_the_fake_embedder_is_chosen_without_the_onnx_extra(base_venv):
    result = _run(base_venv, code="from pydna.embeddings import get_provider; print(get_provider('auto').model_id)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "dna-fake-hash-v1"
