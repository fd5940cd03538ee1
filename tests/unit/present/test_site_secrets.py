"""The site publishes no byte of a run's API key, whatever the journal holds: a run killed before it was sealed
keeps the key its engine printed (its log was never scrubbed), and a run written before scrubbing may hold it in
its failure. The site knows the key from the variable the run names (launch.api_key_env), even when that
variable's name does not look like a secret's."""

from servebook.config import Candidate
from servebook.config.secrets import Scrubber
from servebook.journal import Journal
from servebook.journal.manifest import Manifest
from servebook.present import build_site
from servebook.util.progress import Reporter

KEY = "sk-servebook-site-0123456789abcdef"


def _run(journal: Journal, run_id: str, sealed: bool) -> None:
    candidate = Candidate.model_validate({"name": "keyed", "model": {"path": "tiny:target"},
                                          "launch": {"api_key_env": "SB_ENDPOINT"}})
    writer = journal.start_run(candidate.id, run_id, Scrubber())  # as written before any scrubbing
    identity = {"candidate_id": candidate.id, "candidate_label": "keyed", "candidate": candidate.model_dump(mode="json"),
                "plan_id": "p", "plan": {}, "started_at": "2026-01-01T00:00:00Z"}
    writer.write_json("launch.json", {**identity, "argv": ["sglang", "--api-key", "***"]})
    writer.engine_log.write_text(f"server_args=ServerArgs(api_key='{KEY}', port=1)\nready to serve\n")
    if sealed:
        writer.seal(Manifest.model_validate({
            **identity, "status": "failed", "summary": None, "finished_at": "2026-01-01T00:01:00Z",
            "failure": {"stage": "launch", "cause": "crash", "message": f"died after api_key={KEY}",
                        "log_tail": f"api_key='{KEY}'"}}))


def test_no_page_or_download_of_the_site_holds_a_runs_key(tmp_path, monkeypatch):
    monkeypatch.setenv("SB_ENDPOINT", KEY)
    journal = Journal(tmp_path / "journal")
    _run(journal, "20260101T000000Z-aaaaaaaa", sealed=False)  # killed mid-measure: never sealed
    _run(journal, "20260101T000100Z-bbbbbbbb", sealed=True)
    site = tmp_path / "site"
    build_site(journal, site, reporter=Reporter(quiet=True))
    published = [p for p in site.rglob("*") if p.is_file() and ".cache" not in p.parts]
    assert any(p.name == "engine.log" for p in published), "the log is offered as a download"
    page = (site / "runs" / "20260101T000000Z-aaaaaaaa.html").read_text()
    assert "ready to serve" in page and "api_key=&#39;***&#39;" in page, "the log's tail is shown, scrubbed"
    holding = [str(p.relative_to(site)) for p in published if KEY.encode() in p.read_bytes()]
    assert holding == []
