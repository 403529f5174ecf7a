"""submit() futures and generate() from many Python threads: bitwise the solo results."""

import concurrent.futures
import threading

import detinfer

PROMPTS = ["one", "two two", "three three three", "four", "five five", "six", "seven", "eight"]


def _cfg(i):
    return dict(max_new_tokens=12, temperature=0.9, top_p=0.95, seed=100 + i, ignore_eos=True)


def test_submit_from_8_threads_equals_solo(session):
    solo = [session.generate(p, **_cfg(i)) for i, p in enumerate(PROMPTS)]
    # Every thread submits at once (a barrier), so the engine batches the requests.
    barrier = threading.Barrier(len(PROMPTS))
    results = [None] * len(PROMPTS)

    def worker(i):
        barrier.wait()
        fut = session.submit(PROMPTS[i], **_cfg(i))
        assert isinstance(fut, concurrent.futures.Future)
        results[i] = fut.result(timeout=300)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s, r in zip(solo, results):
        assert r.tokens == s.tokens
        assert r.step_digests == s.step_digests and r.digest == s.digest
        assert r.seed == s.seed


def test_generate_from_8_threads_equals_solo(session):
    solo = [session.generate(p, **_cfg(i)) for i, p in enumerate(PROMPTS)]
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        got = list(pool.map(lambda i: session.generate(PROMPTS[i], **_cfg(i)),
                            range(len(PROMPTS))))
    assert [g.step_digests for g in got] == [s.step_digests for s in solo]


def test_futures_work_with_as_completed_and_callbacks(session):
    futs = [session.submit(p, **_cfg(i)) for i, p in enumerate(PROMPTS)]
    seen = []
    futs[0].add_done_callback(lambda f: seen.append(f.result().seed))
    done = list(concurrent.futures.as_completed(futs, timeout=300))
    assert len(done) == len(PROMPTS)
    assert sorted(f.result().seed for f in futs) == [100 + i for i in range(len(PROMPTS))]
    concurrent.futures.wait(futs)
    assert seen == [100]
    assert len({f.request_id for f in futs}) == len(futs)


def test_future_cancel_stops_generation(session):
    # Whether the engine stops early depends on timing: both outcomes are checked.
    fut = session.submit("cancel me", max_new_tokens=1500, ignore_eos=True, seed=1)
    assert fut.cancel() is False  # as for any running concurrent.futures.Future
    r = fut.result(timeout=300)
    assert r.finish_reason in ("cancelled", "length")
    assert (r.finish_reason == "cancelled") == (len(r.tokens) < 1500)
