"""The executors' code zip: exactly the modules the executor side imports, no Django, the same bytes each time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.shipping import EXECUTOR_MODULES, code_zip, executor_code_zip, master_is_local, modules_needed


def test_the_zip_holds_the_executor_modules_and_what_they_import() -> None:
    names = set(modules_needed())
    assert set(EXECUTOR_MODULES) <= names
    assert {"pipeline.value_decoding", "pipeline.kafka_options", "pipeline.spark_worker"} <= names
    assert {"streams.core.formats.decoders", "streams.core.formats.record", "streams.fanout.kafka_config"} <= names
    assert {"pipeline", "streams", "streams.core", "streams.core.formats", "streams.fanout"} <= names  # packages
    assert not names & {"pipeline.models", "pipeline.runner", "pipeline.job", "pipeline.conf", "streams.models"}


def test_the_zip_is_the_same_bytes_for_the_same_code(tmp_path: Path) -> None:
    assert code_zip(modules_needed()) == code_zip(modules_needed())
    first, again = executor_code_zip(tmp_path), executor_code_zip(tmp_path)
    assert first == again
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_executor_modules_import_from_the_zip_alone_without_django(tmp_path: Path) -> None:
    shipped = executor_code_zip(tmp_path / "zip")
    imports = "; ".join(f"import {name}" for name in EXECUTOR_MODULES)
    check = (
        f"import sys; {imports}; import pipeline; "
        "assert pipeline.__file__.startswith(sys.argv[1]), pipeline.__file__; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, str(shipped)],
        cwd=tmp_path,  # not the project: the zip is the only place its modules are
        env={"PYTHONPATH": str(shipped), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert all(name.endswith(".py") for name in zipfile.ZipFile(shipped).namelist())


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://host:7077", False),
        ("k8s://https://kubernetes.default.svc:443", False),
        ("yarn", False),
    ],
)
def test_code_is_shipped_to_every_master_but_a_local_one(master: str, local: bool) -> None:
    assert master_is_local(master) is local
