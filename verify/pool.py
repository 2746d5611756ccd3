"""Claims run side by side in worker processes (``qstr verify --jobs J``).

Each claim seeds every draw from (run seed, name) and runs its checks with its own thread count,
so a claim's result does not depend on which process ran it or what ran before: J workers give
the records one process gives. Workers are spawned (no fork of a process that holds torch's
thread pools or a CUDA context) and load the same ``--claims`` modules before they run anything.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable, Iterator, Optional, Sequence, Tuple

from qstr.verify.claim import Claim, Context


def _load(modules: Sequence[str]) -> None:
    """Worker start: the paper's claims and the user's ``--claims`` modules, registered once."""
    import qstr.verify.claims  # noqa: F401, PLC0415 - registers the paper's claims
    from qstr.verify.registry import load_claims  # noqa: PLC0415

    for module in modules:
        load_claims(module)


def _run(claim_id: str, ctx: Context, timeout: Optional[float] = None):
    from qstr.verify.registry import REGISTRY, run_claim  # noqa: PLC0415

    return run_claim(REGISTRY[claim_id], ctx, timeout)


def run_claims(
    claims: Sequence[Claim],
    ctx: Context,
    jobs: int,
    modules: Sequence[str] = (),
    stop: Callable[[object], bool] = lambda result: False,
    timeout: Optional[float] = None,
) -> Iterator[Tuple[int, object]]:
    """(index into ``claims``, its Result) as each claim finishes: in order in this process when
    ``jobs`` is 1, else in ``jobs`` spawned workers (longest first is not guessed: claims are
    handed out in table order). After a result for which ``stop(result)`` is true no further
    claim is started. ``timeout``: each claim's time limit in seconds (``run_claim``)."""
    if jobs == 1:
        from qstr.verify.registry import run_claim  # noqa: PLC0415

        for i, c in enumerate(claims):
            result = run_claim(c, ctx, timeout)
            yield i, result
            if stop(result):
                return
        return
    spawn = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=spawn, initializer=_load, initargs=(modules,))
    try:
        pending = {}
        queue = list(enumerate(claims))

        def submit() -> None:
            i, c = queue.pop(0)
            pending[pool.submit(_run, c.id, ctx, timeout)] = i

        for _ in range(min(jobs, len(queue))):
            submit()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f]):
                i = pending.pop(future)
                result = future.result()
                yield i, result
                if stop(result):
                    queue.clear()
                elif queue:
                    submit()
    except BaseException:  # Ctrl-C, SIGTERM, the reader gone: the running claims are not awaited
        _terminate_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _terminate_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's worker processes now, whatever claim they run (SIGTERM to each)."""
    if hasattr(pool, "terminate_workers"):  # Python >= 3.14
        pool.terminate_workers()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
