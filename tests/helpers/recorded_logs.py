"""A GPU engine's recorded log replayed through servebook's failure reading, as a launch that ended would be."""

import shutil
from pathlib import Path

from servebook.engines import get_engine
from servebook.launch.process import EngineProcess


def failure_from_log(recorded: Path, engine: str, argv: list[str], tmp_path: Path):
    """The failure servebook reads from `recorded` (copied, as the journal would hold it) and the log's text."""
    log = tmp_path / "engine.log"
    shutil.copy(recorded, log)
    return EngineProcess(argv, get_engine(engine), "http://127.0.0.1:1", log).failure(), log.read_text()
