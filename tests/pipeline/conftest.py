"""Pipeline fixtures: one SparkSession for the whole test session (it takes seconds to start), a Spark cluster."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.support.polling import condition_wait


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession with Sluice's Kafka data source registered, stopped at the end."""
    from pipeline.job import spark_session

    session = spark_session("local[2]", app_name="sluice-tests")
    yield session
    session.stop()


@pytest.fixture
def pipeline_kafka(kafka: Any, settings: Any) -> Any:
    """The test broker as the pipeline's Kafka (``settings.SLUICE``)."""
    settings.SLUICE = {**settings.SLUICE, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap}
    return kafka


class SparkCluster:
    """A Spark standalone master and its workers, started with pyspark's own ``bin/spark-class``.

    Their environment is what another machine with the same Python environment would give them:
    java, the interpreter for Python workers, and neither the project on ``PYTHONPATH`` nor its
    directory as the working one.
    """

    def __init__(self, base: Path, workers: int = 2) -> None:
        import pyspark

        self.base = base
        self.home = Path(pyspark.__file__).resolve().parent
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.worker_dirs = [base / f"worker-{n}" for n in range(workers)]
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def env(self) -> dict[str, str]:
        java = Path(shutil.which("java") or "/usr/bin/java").resolve()
        java_home = os.environ.get("JAVA_HOME") or str(java.parent.parent)
        return {
            "PATH": os.pathsep.join([str(Path(java_home) / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
            "JAVA_HOME": java_home,
            "HOME": str(self.base),
            "SPARK_HOME": str(self.home),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_WORKER_CORES": "1",
            "SPARK_WORKER_MEMORY": "1g",
            "SPARK_LOG_DIR": str(self.base / "logs"),
        }

    def _start(self, name: str, *args: str) -> Path:
        log = self.base / f"{name}.log"
        with log.open("wb") as out:
            self.processes.append(
                subprocess.Popen(
                    [str(self.home / "bin" / "spark-class"), *args],
                    cwd=self.base,
                    env=self.env(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, killed whole at the end
                )
            )
        self.logs.append(log)
        return log

    def _log_wait(self, log: Path, text: str) -> None:
        condition_wait(
            lambda: text in log.read_text(errors="replace"),
            within=120,
            what=lambda: f"{text!r} in {log.name}:\n{log.read_text(errors='replace')[-3000:]}",
            interval=0.2,
        )

    def start(self) -> SparkCluster:
        master = self._start(
            "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(free_port()),
        )  # fmt: skip
        self._log_wait(master, "I have been elected leader")
        for number, work_dir in enumerate(self.worker_dirs):
            work_dir.mkdir()
            self._start(
                f"worker-{number}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g", "--work-dir", str(work_dir),
                self.url,
            )  # fmt: skip
        for number in range(len(self.worker_dirs)):
            self._log_wait(self.base / f"worker-{number}.log", "Successfully registered with master")
        return self

    def executor_logs(self, worker: int) -> list[Path]:
        """The ``stderr`` of every executor the worker ran (``<work dir>/app-*/<executor>/stderr``)."""
        return sorted(self.worker_dirs[worker].glob("app-*/*/stderr"))

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the JVM and any executor or Python worker it started
            process.wait(30)


@pytest.fixture
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone master and two workers (1 core and 1 GB each) on loopback, stopped after the test."""
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
