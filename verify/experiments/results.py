"""Results files: one JSON line per trained model, appended as it finishes, read back on resume."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from typing import Iterable, List, Optional

import torch

from qstr.verify.experiments.points import Point, config_id
from qstr.verify.files import strict_json, write_atomic, write_json_file
from qstr.verify.version import toolkit_version


def environment(device) -> dict:
    """What ran a row: the toolkit's, Python's and torch's versions, the platform and device."""
    dev = torch.device(device)
    info = {
        "qstr-toolkit": toolkit_version(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": str(dev),
        "threads": torch.get_num_threads(),
    }
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    else:
        info["cpu_count"] = os.cpu_count()
    return info


ROW_KEYS = ("figure", "protocol", "model", "variant", "N", "q", "seed", "quick", "threshold")


class ResultsFile:
    """JSON lines, one row per finished point; rows are only ever appended. With ``figure``, every
    row must be that figure's.

    A run that was interrupted while writing leaves at most one incomplete last line; it is
    cut off (with a note) before the next append, so every line stays one valid JSON object.
    ``read_only`` (``qstr summarize``): the file is never changed, and a damaged line, the last
    one included, is refused with no advice to resume.
    """

    def __init__(self, path: str, figure: Optional[str] = None, *, read_only: bool = False):
        self.path = path
        if not read_only:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.rows: List[dict] = []
        self.repaired = False
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
            if data and not data.endswith(b"\n") and not read_only:
                cut = data.rfind(b"\n") + 1
                with open(path, "r+b") as fh:
                    fh.truncate(cut)
                data = data[:cut]
                self.repaired = True
            numbered = [
                (number, _row(path, number, line, figure, resume=not read_only))
                for number, line in enumerate(data.decode(errors="replace").splitlines(), 1)
                if line.strip()
            ]
            self.rows = unique_rows(path, numbered)
        self.ids = {r.get("point_id") for r in self.rows}

    def __contains__(self, point_id: str) -> bool:
        return point_id in self.ids

    def append(self, row: dict) -> None:
        """Append ``row`` as one strict JSON line: a non-finite number is written as null, and the
        row's ``non_finite`` lists where and what it was."""
        row, found = strict_json(row, default=_json_default)
        if found:
            row["non_finite"] = found
        line = json.dumps(row, allow_nan=False) + "\n"
        try:
            with open(self.path, "a") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # disk full, folder removed: one line (a torn line is cut next time)
            raise ValueError(
                f"--out {self.path}: cannot append a row ({exc.strerror or exc})"
            ) from None
        self.rows.append(row)
        self.ids.add(row.get("point_id"))

    def drop(self, point_ids: Iterable[str]) -> None:
        """Remove the rows of ``point_ids`` (their points then train again), rewriting the file
        atomically; only under the results folder's lock (:mod:`.lock`)."""
        gone = set(point_ids)
        self.rows = [r for r in self.rows if r.get("point_id") not in gone]
        self.ids -= gone
        text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in self.rows)
        write_atomic(self.path, lambda fh: fh.write(text.encode()))

    def rows_for(self, points: Iterable[Point]) -> List[dict]:
        by_id = {r["point_id"]: r for r in self.rows if "point_id" in r}
        return [by_id[p.point_id] for p in points if p.point_id in by_id]


def unique_rows(path: str, numbered: Iterable[tuple]) -> List[dict]:
    """The rows of ``(line number, row)`` pairs read from ``path``, each point once: a repeated
    identical row is dropped with a note on stderr; a point with two different rows is a
    ValueError naming the point and both lines (``qstr reproduce`` and ``summarize`` alike)."""
    first: dict = {}
    rows: List[dict] = []
    for number, row in numbered:
        pid = row.get("point_id")
        if pid is None or pid not in first:
            if pid is not None:
                first[pid] = (number, row)
            rows.append(row)
            continue
        seen, kept = first[pid]
        if row != kept:
            raise ValueError(
                f"{path}, line {number}: point {pid} has another row on line {seen} with "
                "different content; remove the wrong one of the two lines"
            )
        print(
            f"qstr: note: {path}, line {number}: a repeat of line {seen} (point {pid}); "
            "it is counted once",
            file=sys.stderr,
        )
    return rows


def _row(
    path: str, number: int, line: str, figure: Optional[str] = None, *, resume: bool = True
) -> dict:
    """One results line as a dict (of ``figure`` when given), or a ValueError naming the file and
    the line (``resume``: and saying that the same command then resumes)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        then = " and run the same command to resume" if resume else ""
        raise ValueError(
            f"{path}, line {number}: not a JSON object ({exc.msg}); the file is damaged -- "
            f"remove or repair that line{then}"
        ) from None
    if not isinstance(row, dict):
        raise ValueError(f"{path}, line {number}: a JSON {type(row).__name__}, not a results row")
    config = row.get("config")
    if isinstance(config, dict) and "point_id" in row:
        if config_id(config) != row["point_id"]:
            raise ValueError(
                f"{path}, line {number}: its configuration does not give its point_id "
                f"{row['point_id']!r} (edited by hand?); restore or remove that line"
            )
        for key in ROW_KEYS:
            if key in config and key in row and row[key] != config[key]:
                raise ValueError(
                    f"{path}, line {number}: {key} = {row[key]!r} but its configuration says "
                    f"{config[key]!r} (edited by hand?); restore or remove that line"
                )
    if figure is not None and row.get("figure") != figure:
        raise ValueError(
            f"{path}, line {number}: a row of {row.get('figure')!r}, not of {figure}; "
            f"rows of different figures never share a file"
        )
    return row


def _json_default(v):
    if isinstance(v, torch.Tensor):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    return str(v)


def row_of(p: Point, res, *, device, dtype, stack_size: int, extra: Optional[dict] = None) -> dict:
    """The JSON row of a finished point."""
    row = {
        "figure": p.figure,
        "protocol": p.protocol,
        "quick": p.quick,
        "model": p.model,
        "variant": p.variant,
        "test_variant": p.test_variant,
        "N": p.N,
        "q": p.q,
        "seed": p.seed,
        "samples": res.samples,
        "reached": res.reached,
        "steps": res.steps,
        "threshold": p.threshold,
        "test_mse": res.test_mse,
        "train_loss": res.train_loss,
        "curve": [[s, round(v, 6)] for s, v in res.curve],
        "wall_s": round(res.seconds, 3),
        "stack_size": stack_size,
        "device": str(device),
        "dtype": str(dtype).replace("torch.", ""),
        "point_id": p.point_id,
        "config": p.config,
        "env": environment(device),
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        row.update(extra)
    return row


def write_json(path: str, obj) -> None:
    """``obj`` as JSON at ``path`` (in a results folder), atomically."""
    write_json_file(path, obj, flag="--out", default=_json_default)


def figure_stem(out_dir: str, figure: str, protocol: str, quick: bool) -> str:
    """``out_dir/<figure>-<protocol>[-quick]``: the stem of a figure's PNG, PDF and summary."""
    return os.path.join(out_dir, f"{figure}-{protocol}" + ("-quick" if quick else ""))
