import pytest

from servebook.config.names import is_safe_name, safe_name_from
from servebook.config.secrets import REDACTED, Scrubber, looks_secret


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "api_key", "apiKey", "admin_api_key", "password",
                                  "AWS_SECRET_ACCESS_KEY", "Authorization", "hf-token"])
def test_secret_names(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["max_tokens", "TOKENIZERS_PARALLELISM", "api_key_env", "bos_token", "eos_token",
                                  "cached_tokens", "kv_cache_dtype", "auth_file", "OMP_NUM_THREADS", "keyword"])
def test_names_that_are_not_secrets(name):
    assert not looks_secret(name)


def test_scrubber_removes_keys_by_name_by_flag_and_by_value():
    key = "sk-live-0123456789abcdef"
    scrub = Scrubber.from_environment("SB_KEY", environ={"SB_KEY": key, "HOME": "/root", "SHORT_TOKEN": "1"})
    assert scrub.values == (key,)  # values too short to be keys are not blanked everywhere
    server_info = {"api_key": key, "model_path": "/m", "max_tokens": 128, "api_key_env": "SB_KEY",
                   "argv": ["llama-server", "--api-key", key, "--admin-api-key=hunter2hunter2"],
                   "nested": [{"note": f"started with key {key}"}], "bos_token": "<s>"}
    cleaned = scrub.json(server_info)
    assert cleaned["api_key"] == REDACTED and cleaned["api_key_env"] == "SB_KEY" and cleaned["bos_token"] == "<s>"
    assert cleaned["argv"] == ["llama-server", "--api-key", REDACTED, f"--admin-api-key={REDACTED}"]
    assert cleaned["nested"][0]["note"] == f"started with key {REDACTED}" and cleaned["max_tokens"] == 128
    assert key.encode() not in scrub.bytes(f"log: Authorization: Bearer {key}\n".encode())


@pytest.mark.parametrize("name", ["a/b", "../x", "..", ".hidden", "a\\b", "", "a b", "x" * 121, "a..b", "-lead"])
def test_unsafe_file_names(name):
    assert not is_safe_name(name)


def test_generated_names_are_made_safe():
    name = safe_name_from('drafter={"kind": "ngram"},model.path=/models/../x.gguf')
    assert is_safe_name(name) and "/" not in name


def test_a_key_echoed_in_a_tables_text_never_reaches_the_journal(tmp_path):
    import warnings

    import pandas as pd

    from servebook.journal.writer import RunWriter

    key = "sk-live-0123456789abcdef"
    writer = RunWriter(tmp_path / "run", Scrubber.from_environment("SB_KEY", environ={"SB_KEY": key}))
    (tmp_path / "run").mkdir()
    # a text column (pandas 3's str dtype) and an object one: both scrubbed, with no reliance on deprecated dtype
    # selection (pandas 4 will stop counting str columns as object)
    frame = pd.DataFrame({"text": [f"echo {key}", "fine"], "error": [None, {"detail": "x"}], "n": [1, 2]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = writer.write_table("requests", frame)
    assert key.encode() not in path.read_bytes()
    assert pd.read_parquet(path)["text"].tolist() == [f"echo {REDACTED}", "fine"]
