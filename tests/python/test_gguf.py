"""A GGUF file through the Python Session (docs/gguf.md): the file written by
`detinfer make-tiny-model --gguf`, and Q8_0 and Q4_K_M files written by `detinfer quantize`,
give what the model folder gives (plain, and with weights="q8_0" / "q4_k_m"), text prompts
and chats included."""

import subprocess

import pytest

from conftest import cli, detinfer

PROMPT = "Reproducible, even from a GGUF file."
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    subprocess.run([cli(), "make-tiny-model", "--arch", "qwen2", "--dtype", "bf16", "--seed",
                    "3", "--out", str(d / "hf"), "--gguf", str(d / "model.gguf")],
                   check=True, capture_output=True)
    subprocess.run([cli(), "quantize", "--model", str(d / "hf"), "--type", "q8_0",
                    "--keep-embedding", "--out", str(d / "q8.gguf")],
                   check=True, capture_output=True)
    # Rows of whole K super-blocks (256) for the q4_k_m mix.
    subprocess.run([cli(), "make-tiny-model", "--arch", "llama", "--dtype", "bf16", "--seed",
                    "3", "--hidden", "256", "--intermediate", "512", "--out", str(d / "hf256")],
                   check=True, capture_output=True)
    subprocess.run([cli(), "quantize", "--model", str(d / "hf256"), "--type", "q4_k_m",
                    "--keep-embedding", "--out", str(d / "q4km.gguf")],
                   check=True, capture_output=True)
    return d


@pytest.mark.parametrize("folder,weights,gguf", [("hf", "native", "model.gguf"),
                                                 ("hf", "q8_0", "q8.gguf"),
                                                 ("hf256", "q4_k_m", "q4km.gguf")])
def test_gguf_session_equals_the_folder(files, folder, weights, gguf):
    with detinfer.Session(str(files / folder), threads=1, weights=weights) as a, \
            detinfer.Session(str(files / gguf), threads=1) as b:
        assert b.tokenizer.encode(PROMPT) == a.tokenizer.encode(PROMPT)
        cfg = dict(max_new_tokens=10, temperature=0.8, seed=5, ignore_eos=True)
        ra, rb = a.generate(PROMPT, **cfg), b.generate(PROMPT, **cfg)
        assert rb.tokens == ra.tokens and rb.text == ra.text and rb.digest == ra.digest
        ca, cb = a.chat(MESSAGES, **cfg), b.chat(MESSAGES, **cfg)
        assert cb.tokens == ca.tokens and cb.digest == ca.digest
