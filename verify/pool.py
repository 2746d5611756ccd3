"""Claims run side by side in worker processes (``qstr verify --jobs J``).

Each claim seeds every draw from (run seed, name) and runs its checks with its own thread count,
so a claim's result does not depend on which process ran it or what ran before: J workers give
the records one process gives. Workers are spawned (no fork of a process that holds torch's
thread pools or a CUDA context). The pool is handed the claims it runs and imports no catalog:
a worker gets each claim by reference, as pickle sends a function (the ``--claims`` modules
loaded first, then the module each claim is declared in, which registers it), and runs the
registered claim of that id.
"""

from __future__ import annotations

import importlib
import multiprocessing
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple

from qstr.verify import registry
from qstr.verify.claim import Claim, Context
from qstr.verify.runner import run_claim


def _homes(claims: Sequence[Claim]) -> Tuple[str, ...]:
    """The modules the claims are declared in (where their inputs are defined), each once."""
    homes = (getattr(c.inputs_function, "__module__", None) for c in claims)
    return tuple(dict.fromkeys(h for h in homes if h and h != "__main__"))


_UNLOADED: Dict[str, str] = {}  # in a worker: a claim's module that failed to import -> why


def _load(modules: Sequence[str], homes: Sequence[str] = ()) -> None:
    """Worker start: the user's ``--claims`` modules, then the module of each claim to run (the
    paper's claim modules register the paper's catalog), each registered once. A module that
    cannot be imported is remembered: the claims it should register fail when run, saying so."""
    for module in modules:
        registry.load_claims(module)
    for home in homes:
        try:
            importlib.import_module(home)
        except Exception as exc:  # noqa: BLE001 - reported by _run for the claims it holds
            _UNLOADED[home] = f"{type(exc).__name__}: {exc}"


def _run(claim_id: str, ctx: Context, timeout: Optional[float] = None):
    if claim_id not in registry.REGISTRY:
        why = "; ".join(f"{m}: {e}" for m, e in _UNLOADED.items())
        raise ValueError(
            f"claim {claim_id!r} is not registered in the worker process"
            + (f" (importing {why})" if why else "")
        )
    return run_claim(registry.REGISTRY[claim_id], ctx, timeout)


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
        for i, c in enumerate(claims):
            result = run_claim(c, ctx, timeout)
            yield i, result
            if stop(result):
                return
        return
    spawn = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        jobs, mp_context=spawn, initializer=_load, initargs=(tuple(modules), _homes(claims))
    )
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
