"""Secrets (API keys, tokens): one policy, used to refuse them in inputs and to scrub every byte servebook writes.

Two layers, because neither alone is enough:
- by name: a field or variable whose name says it holds a secret (`api_key`, `HF_TOKEN`) and an
  argument after a secret-taking flag (`--api-key`) are replaced wherever they appear, including
  in what an engine reports about itself (SGLang's server info carries its `api_key`);
- by value: the secrets servebook knows of (the key named by `launch.api_key_env`, and every
  secret-named variable of its own environment, which engines inherit) are replaced in any text,
  so a key an engine prints into its log, or a notebook echoes, is caught too.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

REDACTED = "***"
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--api-key-file", "--hf-token", "-hft", "--ssl-key-file"})
_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS",
                           "AUTHORIZATION", "BEARER", "PRIVATEKEY"})
# A name that points at a secret (`api_key_env: SB_KEY`, `api_key_file`) is not itself one.
_REFERENCE_WORDS = frozenset({"ENV", "NAME", "FILE", "PATH", "FLAG", "VAR"})
# Tokenizer vocabulary (`bos_token: "<s>"`, llama.cpp /props), not credentials.
_VOCABULARY_WORDS = frozenset({"BOS", "EOS", "EOT", "PAD", "UNK", "SEP", "CLS", "MASK", "FIM", "PRE", "SUF", "MID",
                               "START", "END", "STOP", "SPECIAL", "CHAT", "THINK", "IMAGE", "AUDIO"})
_SHORTEST_SECRET_VALUE = 8  # shorter values ("1", "true") would blank out unrelated text


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.upper()) if w]


@functools.lru_cache(maxsize=4096)  # the same field names come back in every manifest a site publishes
def looks_secret(name: str) -> bool:
    """Whether a variable or field named `name` holds a secret: HF_TOKEN, api_key, apiKey, OPENAI_API_KEY yes;
    max_tokens, TOKENIZERS_PARALLELISM, api_key_env, bos_token no."""
    words = _words(name)
    if not words or words[-1] in _REFERENCE_WORDS:
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            if word == "TOKEN" and i and words[i - 1] in _VOCABULARY_WORDS:
                continue
            return True
    return False


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if looks_secret(k) else v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS:
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
            continue
        out.append(arg)
    return out


#: values with nothing inside to scrub
_LEAVES = (int, float, bool, type(None))


@dataclass(frozen=True)
class Scrubber:
    """Removes secrets from what is about to be written: JSON-like objects, text, bytes, table cells."""

    values: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, *names: str | None, environ: Mapping[str, str] | None = None) -> "Scrubber":
        """The values of the variables `names` (e.g. launch.api_key_env) and of every secret-named variable."""
        environ = os.environ if environ is None else environ
        found = {environ.get(n, "") for n in names if n}
        found |= {v for k, v in environ.items() if looks_secret(k)}
        return cls(tuple(sorted((v for v in found if len(v) >= _SHORTEST_SECRET_VALUE), key=len, reverse=True)))

    def adding(self, *names: str | None, environ: Mapping[str, str] | None = None) -> "Scrubber":
        """This scrubber and the values of the variables `names`: a journal's reader (the site) learns the
        variable each run took its key from only from the run itself. Only those are read: it is called for every
        run of a build, whose scrubber already holds the environment's secret-named variables."""
        environ = os.environ if environ is None else environ
        more = {v for n in names if n and len(v := environ.get(n, "")) >= _SHORTEST_SECRET_VALUE}
        if more <= set(self.values):
            return self
        return Scrubber(tuple(sorted(set(self.values) | more, key=len, reverse=True)))

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        for value in self.values:
            encoded = value.encode()
            if encoded in data:
                data = data.replace(encoded, REDACTED.encode())
        return data

    def json(self, obj: Any) -> Any:
        """A copy of `obj` with secret-named string fields, secret flag arguments and known values replaced."""
        # the exact types first, the commonest first: the ABC check of Mapping is ten times slower, and a manifest
        # is mostly numbers and strings (scrubbing every run's manifest was a twentieth of a site's full build)
        kind = type(obj)
        if kind is str:
            return self.text(obj)
        if kind in _LEAVES:
            return obj
        if kind is dict or (kind not in (list, tuple) and isinstance(obj, Mapping)):
            return {k: (REDACTED if isinstance(v, str) and v and looks_secret(str(k)) else self.json(v))
                    for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            items = redact_argv(obj) if all(isinstance(x, str) for x in obj) else obj
            return [self.json(x) for x in items]
        if isinstance(obj, str):  # a str subclass
            return self.text(obj)
        return obj

    def contains_secret(self, data: builtins.bytes) -> bool:
        return any(value.encode() in data for value in self.values)
