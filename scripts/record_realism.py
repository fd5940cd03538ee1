"""Record a model's decode outputs as servebook's realism check reads them, for the unit tests' fixtures
(tests/fixtures/realism/): each prompt of a category sent as a decode cell sends it (chat, greedy, a forced length),
its text tokenized by the engine, and sent again unforced to find where the model stops on its own.

    .venv/bin/python scripts/record_realism.py tiny:target prose tests/fixtures/realism/tiny-target-prose.json
    .venv/bin/python scripts/record_realism.py real:gemma3-270m copy tests/fixtures/realism/gemma3-270m-copy.json \
        --style completion
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import httpx

from servebook.config.candidate import Candidate
from servebook.engines import get_engine
from servebook.launch.preflight import preflight
from servebook.launch.process import EngineProcess, free_port
from servebook.measure.figures.realism import Realism, realism_codes, realism_of, sample_text
from servebook.measure.prompts import completion_prompt, decode_prompt
from servebook.util.progress import Reporter


def record(model: str, category: str, prompts: int, output_tokens: int, style: str) -> dict:
    candidate = Candidate.model_validate({"engine": "llamacpp", "model": {"path": model},
                                          "knobs": {"max_running_requests": 1, "context_length": 4096}})
    paths = preflight(candidate, Reporter(quiet=True))
    adapter = get_engine("llamacpp")
    port = free_port()
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=None,
                        binary=paths.engine_binary, backend=paths.backend)
    outputs = []
    with tempfile.TemporaryDirectory() as folder:
        engine = EngineProcess(argv, adapter, f"http://127.0.0.1:{port}", Path(folder) / "engine.log")
        with engine, httpx.Client(base_url=engine.base_url, timeout=120) as http:
            engine.wait_ready(120)

            def tokens(text: str) -> list[int]:
                return http.post("/tokenize", json={"content": text, "add_special": False}).json()["tokens"]

            for i in range(prompts):
                tag = f"record:{category}:{i}"
                if style == "chat":
                    prompt = decode_prompt(category, i, tag)[0]["content"]
                    body: dict = {"messages": [{"role": "user", "content": prompt}]}
                else:
                    prompt = completion_prompt(category, i, tag)
                    body = {"prompt": prompt}
                body.update(max_tokens=output_tokens, temperature=0)
                path = "/v1/chat/completions" if style == "chat" else "/v1/completions"
                forced = http.post(path, json={**body, "ignore_eos": True}).json()
                free = http.post(path, json=body).json()
                choice = forced["choices"][0]
                text = choice["message"]["content"] if style == "chat" else choice["text"]
                stopped = free["choices"][0]["finish_reason"] == "stop"
                outputs.append({"text": text, "prompt_tokens": tokens(prompt),
                                "output_tokens": tokens(text), "forced_tokens": forced["usage"]["completion_tokens"],
                                "natural_tokens": free["usage"]["completion_tokens"] if stopped else None})
    return {"model": model, "category": category, "style": style, "output_tokens": output_tokens,
            "outputs": outputs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("category")
    parser.add_argument("out", type=Path)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--style", choices=("chat", "completion"), default="chat",
                        help="as plan.decode.prompt_style: completion for a base model")
    args = parser.parse_args()
    found = record(args.model, args.category, args.prompts, args.output_tokens, args.style)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    figures = realism_of([Realism(o["prompt_tokens"], o["output_tokens"], o["forced_tokens"], o["natural_tokens"],
                                  True) for o in found["outputs"]], sample_text(found["outputs"][0]["text"]))
    print(json.dumps({**figures, "codes": realism_codes(figures)}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
