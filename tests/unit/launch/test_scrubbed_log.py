"""An engine's log holds no byte of a known secret, however its run ends: the engine writes into a pipe and only
scrubbed bytes reach the file, so even servebook killed mid-run (nothing sealed, nothing scrubbed after) leaves
none behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from servebook.config.secrets import Scrubber
from servebook.engines import get_engine
from servebook.launch.process import EngineProcess

KEY = "sk-servebook-test-0123456789abcdef"
# An engine that prints its key as SGLang prints its server args, split over two writes (a secret may straddle
# two reads of the pipe), then serves until killed.
ENGINE = ("import sys, time; w = sys.stdout.buffer; "
          f"w.write(b'server_args: api_key={KEY[:10]}'); w.flush(); time.sleep(0.3); "
          f"w.write(b'{KEY[10:]} port=1\\n'); w.write(b'ready to serve\\n'); w.flush(); time.sleep(600)")


def _engine(log: Path, scrubber: Scrubber) -> EngineProcess:
    return EngineProcess([sys.executable, "-c", ENGINE], get_engine("sglang"), "http://127.0.0.1:1", log,
                         scrubber=scrubber)


def _wait_for(log: Path, text: bytes, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.is_file() and text in log.read_bytes():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never reached {log}: {log.read_bytes() if log.is_file() else b''!r}")


def test_a_stopped_engine_that_printed_its_key_leaves_none_in_its_log(tmp_path):
    log = tmp_path / "engine.log"
    engine = _engine(log, Scrubber((KEY,))).start()
    try:
        _wait_for(log, b"ready to serve")
    finally:
        engine.stop(grace_s=2)
    data = log.read_bytes()
    assert KEY.encode() not in data and KEY[:10].encode() not in data
    assert b"server_args: api_key=*** port=1\nready to serve\n" in data, data


def test_a_run_killed_before_it_was_sealed_leaves_no_key_in_the_engine_log(tmp_path):
    """servebook itself killed (SIGKILL: no handler, no seal): the engine dies with it, and its log is as scrubbed
    as a sealed run's."""
    log = tmp_path / "engine.log"
    servebook = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from servebook.config.secrets import Scrubber\n"
        "from tests.unit.launch.test_scrubbed_log import KEY, _engine\n"
        "_engine(Path(sys.argv[1]), Scrubber.from_environment('SB_ENDPOINT')).start()\n"
        "time.sleep(600)\n"), str(log)],
        env={**os.environ, "SB_ENDPOINT": KEY}, cwd=Path(__file__).parents[3])
    try:
        _wait_for(log, b"ready to serve")
    finally:
        servebook.send_signal(signal.SIGKILL)
        servebook.wait()
    time.sleep(0.3)  # the engine goes with its parent (PR_SET_PDEATHSIG)
    assert KEY.encode() not in log.read_bytes()
    assert KEY[:10].encode() not in log.read_bytes()


def test_with_no_secret_known_the_engine_writes_its_log_itself(tmp_path):
    log = tmp_path / "engine.log"
    engine = _engine(log, Scrubber()).start()
    try:
        _wait_for(log, b"ready to serve")
        assert engine._log_writer is None
    finally:
        engine.stop(grace_s=2)
