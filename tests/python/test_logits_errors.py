"""logits() arrays against `detinfer logits`, and detinfer.Error for bad input."""

import json
import subprocess

import numpy
import pytest

import detinfer
from conftest import cli

TOKENS = [1, 17, 42, 99, 300, 7]


def test_logits_equal_the_cli_bitwise(tiny_model, tmp_path):
    out = tmp_path / "logits.bin"
    subprocess.run([cli(), "logits", "--model", tiny_model, "--tokens",
                    ",".join(map(str, TOKENS)), "--out", str(out)], check=True,
                   capture_output=True)
    side = json.loads((tmp_path / "logits.bin.json").read_text())
    want = numpy.fromfile(out, dtype="<f4").reshape(side["shape"])
    got = detinfer.logits(tiny_model, TOKENS)
    assert got.dtype == numpy.float32 and got.shape == tuple(side["shape"])
    assert got.tobytes() == want.tobytes()  # bitwise, NaN-safe
    # No copy: the array views the buffer the C++ side filled, and it is read-only.
    assert not got.flags.owndata and got.base is not None and not got.flags.writeable


def test_session_logits_and_numpy_ids(session, tiny_model):
    a = session.logits(numpy.array(TOKENS, dtype=numpy.int64))
    assert a.tobytes() == detinfer.logits(tiny_model, TOKENS).tobytes()
    # The last row's argmax is the greedy first token.
    r = session.generate(TOKENS, max_new_tokens=1)
    assert int(a[-1].argmax()) == r.tokens[0]


@pytest.mark.parametrize("kwargs,field", [
    ({"temperature": -1.0}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"max_new_tokens": "8"}, "max_new_tokens"),
    ({"max_new_tokens": True}, "max_new_tokens"),
    ({"seed": -1}, "seed"),
    ({"stop_token_ids": [1 << 40]}, "stop_token_ids"),
    ({"no_such_option": 1}, "no_such_option"),
])
def test_bad_config_names_the_field(session, kwargs, field):
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        session.generate("hi", **kwargs)
    assert e.value.field == field and e.value.code == "invalid_argument"
    assert isinstance(e.value, detinfer.Error) and isinstance(e.value, ValueError)


def test_bad_prompts_and_messages(session):
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        session.generate([session.vocab_size + 5])
    assert e.value.field
    with pytest.raises(detinfer.InvalidArgumentError):
        session.generate(3.5)
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        session.chat([{"role": "user", "content": 5}])
    assert e.value.field.startswith("messages[0]")
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        session.stream("hi", temperature=500)
    assert e.value.field == "temperature"
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        session.submit("hi", num_beams=0)
    assert e.value.field == "num_beams"


def test_session_errors(tmp_path, tiny_model):
    with pytest.raises(detinfer.NotFoundError):
        detinfer.Session(str(tmp_path / "missing"))
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        detinfer.Session(tiny_model, threads="two")
    assert e.value.field == "threads"
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        detinfer.Session(tiny_model, mode="fastest")
    assert e.value.field == "mode"
    with pytest.raises(detinfer.InvalidArgumentError) as e:
        detinfer.Session(tiny_model, bogus=1)
    assert e.value.field == "bogus"
    s = detinfer.Session(tiny_model, threads=1)
    s.close()
    assert s.closed
    with pytest.raises(detinfer.UnavailableError):
        s.generate("hi")
    with pytest.raises(detinfer.Error):
        detinfer.diff("{not json", "{}")
