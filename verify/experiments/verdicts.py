"""The verdict on each statement the paper makes about Figures 1-3, computed from the rows by rules
written once here (docs/experiments.md, "Does it reproduce?"); the README's and
docs/experiments.md's table of them is ``qstr.verify.experiments.verdict_table``'s.

A verdict is "reproduced", "not reproduced", "inconclusive" (not significant, and either the
power at the smallest growth the statement implies is below POWER or CENSORED_MAX or more of
the log ratios are censored), or "reproduced under a stated protocol choice". "A gap grows" is
:func:`growth`: within one (N, seed) (or (q, seed)) the models train on the same prompts, so each
(value, seed) gives one log ratio, known exactly or, where a run is censored, only on one side
(stopped at its cap: above; reached at its first check: below); Gehan's scores of these intervals
against the value, labels permuted within each seed, give a one-sided p; across values a seed
links nothing. p is Holm-adjusted over the tests of the table (or of a summary), a test on
prompts shared with another counted once.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from qstr.verify.experiments import analysis

ALPHA = 0.05  # level of the trend tests ("grows") after Holm, and of the lack-of-fit test
FLAT_EXPONENT = 1.0  # "nearly flat": samples ~ N^a with a's 95% interval below 1 (sublinear)
BLOCK_SHARE = 0.9  # Figure 2: the Lemma 11 block holds at least this share of W_Q^T W_K's mass
MU_ASSUMED = 0.5  # Assumption 3: codes with coherence at most 1/2
REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
UNDER_CHOICE = "reproduced under a stated protocol choice"


def gap_trend(rows: Sequence[dict], model: str, by: str) -> dict:
    """``model`` against the Transformer on shared prompts (analysis.paired_gap) and ``grows``:
    one-sided paired trend p < ALPHA and the ratio's 95% interval at the largest ``by`` above 1."""
    out = analysis.paired_gap(rows, model, "transformer", by=by)
    trend, per = out["trend"], out["per"]
    top = per[max(per, key=float)] if per else None
    out["grows"] = bool(
        trend is not None and trend["p_one_sided"] < ALPHA and top and top["ci"][0] > 1
    )
    return out


def _said(pg: dict, model: str, by: str) -> str:
    """The numbers a gap verdict rests on: the ratio at the smallest and largest value, p."""
    per = pg["per"]
    if not per:
        return f"{model}: no paired runs"
    lo, hi = min(per, key=float), max(per, key=float)
    p = "no trend test" if pg["trend"] is None else f"p = {pg['trend']['p_one_sided']:.2g}"

    def at(v):
        r = per[v]
        return f"{r['geo_mean']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"

    capped = sum(r["censored"] for r in per.values())
    capped = f", {capped} runs at their cap" if capped else ""
    return f"{model} / Transformer {at(lo)} at {by} = {lo}, {at(hi)} at {by} = {hi}, {p}{capped}"


def _verdict(figure: str, statement: str, rule: str, numbers: str, holds: bool) -> dict:
    return {
        "figure": figure,
        "statement": statement,
        "rule": rule,
        "numbers": numbers,
        "verdict": REPRODUCED if holds else NOT_REPRODUCED,
        "protocol_choice": None,
    }


INCONCLUSIVE = "inconclusive"
POWER = 0.8  # below this power at the smallest implied growth, "not significant" is inconclusive
MIN_GROWTH = 1.5  # the smallest growth "grows" implies: the ratio 1.5x larger at the ends
CENSORED_MAX = 0.5  # this share of the log ratios censored or more: the runs cannot decide
MIN_SPAN = 2.0  # no exponent over a range of N with N_max / N_min below this
# the published code's thresholds (test MSE) and the sweep each verdict is recomputed at
SWEEP = {
    "1str": (0.7, 0.75, 0.8, 0.85, 0.9),
    "simple": (0.02, 0.025, 0.03, 0.05, 0.1),
    "qstr": (0.88, 0.9, 0.92, 0.94, 0.96),
}


def at_threshold(rows: Sequence[dict], t: float) -> List[dict]:
    """The rows at test-MSE threshold t >= theirs, rebuilt from their stored curves: samples at
    the first stored check with test MSE <= t (None if none: capped)."""
    out = []
    for r in rows:
        if math.isclose(t, r["threshold"]):
            out.append(r)
            continue
        assert t >= r["threshold"], "a reached run's curve ends at its own threshold"
        step = next((s for s, mse in r["curve"] if mse <= t), None)
        bs = r["config"]["batch_size"]
        out.append(dict(r, samples=None if step is None else step * bs, steps=step or r["steps"]))
    return out


def _left(r: dict) -> bool:
    """Reached at the first check: its samples an upper bound (left-censored)."""
    curve = r.get("curve")
    return bool(r["samples"] is not None and curve and r["steps"] <= curve[0][0])


def _log_ratio(a: dict, b: dict):
    """log(samples a / samples b) (a capped run at its cap) and its bounds [lo, hi]."""
    v = math.log(analysis._cap_samples(a) / analysis._cap_samples(b))
    lo = -math.inf if (_left(a) or b["samples"] is None) else v
    hi = math.inf if (a["samples"] is None or _left(b)) else v
    return v, lo, hi


def growth(rows: Sequence[dict], num: str, den: str, by: str, n_perm: int = 20000) -> dict:
    """Does samples[num] / samples[den] grow with ``by``? Gehan trend p (analysis.censored_trend),
    per-value geometric means (analysis.paired_gap), the mean per-seed slope with its t interval,
    and noncentral-t power at MIN_GROWTH and over that interval."""
    key = {(r["model"], r[by], r["seed"]): r for r in rows}
    values = sorted({r[by] for r in rows if r["model"] == num})
    seeds = sorted(
        {s for (m, _, s) in key if all((m2, v, s) in key for m2 in (num, den) for v in values)}
    )
    cells = np.array(
        [[_log_ratio(key[(num, v, s)], key[(den, v, s)]) for v in values] for s in seeds]
    )
    out = analysis.paired_gap(rows, num, den, by=by, n_perm=1)
    out.pop("trend")
    x = np.array(values, float)
    if len(seeds) < 2 or len(values) < 2 or not out["per"]:  # no trend to test: cannot decide
        nan = math.nan
        return out | {"p": 1.0, "slope": nan, "slope_ci": [nan, nan], "power_least": nan,
                      "power_range": [nan, nan], "censored": 0.0, "seeds": len(seeds),
                      "top_lo": nan, "ratio_ends": [nan, nan]}  # fmt: skip
    slopes = ((cells[..., 0] - cells[..., 0].mean(1, keepdims=True)) * (x - x.mean())).sum(1)
    slopes = slopes / ((x - x.mean()) ** 2).sum()
    n, mean, sd = len(seeds), float(slopes.mean()), float(slopes.std(ddof=1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    least = math.log(MIN_GROWTH) / (x.max() - x.min())
    top = out["per"][str(max(values))]
    return out | {
        "p": analysis.censored_trend(values, cells[..., 1], cells[..., 2], n_perm=n_perm)["p"],
        "slope": mean,
        "slope_ci": [mean - half, mean + half],
        "power_least": analysis.t_power(least, sd, n, ALPHA),
        "power_range": [analysis.t_power(e, sd, n, ALPHA) for e in (mean - half, mean + half)],
        "censored": float(np.isinf(cells[..., 1:]).any(-1).mean()),
        "seeds": n,
        "top_lo": top["ci"][0],
        "ratio_ends": [out["per"][str(min(values))]["geo_mean"], top["geo_mean"]],
    }


def decide(test: dict, p: float) -> Tuple[str, str]:
    """A growth test's verdict at (adjusted) p, and why."""
    if p < ALPHA and test["top_lo"] > 1:
        return REPRODUCED, "grows"
    if p < ALPHA and test["censored"] < CENSORED_MAX:
        return NOT_REPRODUCED, f"grows, but below 1 at the largest value ({test['top_lo']:.2f})"
    if test["censored"] >= CENSORED_MAX:
        return INCONCLUSIVE, f"{test['censored']:.0%} of the log ratios censored"
    if not test["power_least"] >= POWER:  # NaN (fewer than 2 seeds): cannot decide either
        return INCONCLUSIVE, f"power {test['power_least']:.2f} at {MIN_GROWTH:g}x growth"
    return NOT_REPRODUCED, "not shown to grow"


def shape(rows: Sequence[dict], model: str) -> dict:
    """One model's samples in N: a power law's exponent where it fits (lack-of-fit p >= ALPHA and
    N_max / N_min >= MIN_SPAN), else the end ratio with a per-N-means interval; bounds named."""
    rs = [r for r in rows if r["model"] == model]
    N = [r["N"] for r in rs]
    y = [math.log(analysis._cap_samples(r)) for r in rs]
    lof = analysis.lack_of_fit(N, y)
    span = max(N) / min(N)
    cens = sum(r["samples"] is None for r in rs)
    left = sum(_left(r) for r in rs)
    out = {"lof": lof, "span": span, "capped": cens, "left": left, "runs": len(rs)}
    if span >= MIN_SPAN and lof["p"] >= ALPHA and not left:
        caps = [analysis._cap_samples(r) for r in rs]
        fit = analysis.fit_censored_exponent(N, [r["samples"] for r in rs], caps, n_boot=200)
        return out | {"a": fit["a"], "ci": fit["ci"]}
    top, bot = [r for r in rs if r["N"] == max(N)], [r for r in rs if r["N"] == min(N)]
    up = any(r["samples"] is None for r in top) or any(_left(r) for r in bot)
    down = any(r["samples"] is None for r in bot) or any(_left(r) for r in top)
    bound = {(True, False): "a lower bound", (False, True): "an upper bound"}.get((up, down))
    return (
        out
        | analysis.end_ratio(N, y)
        | {"bound": None if not (up or down) else bound or "no bound"}
    )


def _shape_said(name: str, sh: dict) -> str:
    """A model's shape in words: its exponent, or its end ratio and why (docs/experiments.md)."""
    lof = f"lack-of-fit p = {sh['lof']['p']:.2g}"
    extra = "".join(
        f", {k} {w}" for k, w in (("capped", sh["capped"]), ("left-censored", sh["left"])) if w
    )
    if "a" in sh:
        return f"{name} a = {sh['a']:.2f} [{sh['ci'][0]:.2f}, {sh['ci'][1]:.2f}] ({lof}{extra})"
    why = "span" if sh["span"] < MIN_SPAN else "no power law"
    bound = f", {sh['bound']}" if sh["bound"] else ""
    return (
        f"{name} end ratio {sh['ratio']:.2f} [{sh['ci'][0]:.2f}, {sh['ci'][1]:.2f}]{bound} "
        f"({why}: {lof}, N_max/N_min = {sh['span']:.2f}{extra})"
    )


def _test_said(name: str, t: dict) -> str:
    """A growth test in words: the ratio at the ends, p and Holm's p, power, censored share."""
    r0, r1 = t["ratio_ends"]
    return (
        f"{name} {r0:.2f} -> {r1:.2f}, p = {t['p']:.2g} (Holm {t['p_holm']:.2g}), power at "
        f"{MIN_GROWTH:g}x {t['power_least']:.2f} (over the effect's interval "
        f"{t['power_range'][0]:.2f}-{t['power_range'][1]:.2f}), {t['censored']:.0%} censored"
    )


def claims(rows: Sequence[dict], figure: str) -> List[dict]:
    """The paper's statements about one run's rows, each with its growth tests (``tests``: name,
    family, role "verdict" or "finding", the test) before Holm."""
    out = []
    for variant in sorted({r["variant"] for r in rows}):
        part = [r for r in rows if r["variant"] == variant]
        by = "q" if figure == "3" else "N"
        fam = (figure, variant)
        if figure == "3":
            out.append(
                _claim(
                    "3",
                    "the gap between the Transformer and the other two grows with q",
                    "both gaps to the Transformer grow with q",
                    part,
                    fam,
                    [("rnn", "transformer"), ("ffn", "transformer")],
                    [],
                    by,
                )
            )
        elif variant == "1str":
            c = _claim(
                "1, 1STR",
                "the Transformer is nearly flat in N; the RNN and the FFN grow",
                "the Transformer grows sublinearly (exponent interval, or where no power "
                "law fits the end ratio's interval, below N_max/N_min); both gaps grow",
                part,
                fam,
                [("rnn", "transformer"), ("ffn", "transformer")],
                [],
                by,
            )
            c["shapes"] = {m: shape(part, m) for m in ("transformer", "rnn", "ffn")}
            out.append(c)
        else:
            out.append(
                _claim(
                    "1, simple-1STR",
                    "the FFN grows in N away from the Transformer",
                    "the FFN's gap to the Transformer grows",
                    part,
                    fam,
                    [("ffn", "transformer")],
                    [],
                    by,
                )
            )
            c = _claim(
                "1, simple-1STR",
                "the RNN performs closer to the Transformer, with a much milder dependence "
                "on N than the FFN",
                "FFN / RNN above 1 at every N and growing (so the RNN's growth is milder); "
                "the RNN / Transformer trend reported beside it, not the verdict",
                part,
                fam,
                [("ffn", "rnn")],
                [("rnn", "transformer")],
                by,
            )
            out.append(c)
    return out


def _claim(figure, statement, rule, rows, fam, verdict_pairs, finding_pairs, by) -> dict:
    """A statement with the growth tests of its (numerator, denominator) pairs."""
    tests = []
    for pairs, role in ((verdict_pairs, "verdict"), (finding_pairs, "finding")):
        for num, den in pairs:
            t = growth(rows, num, den, by)
            name = f"{num.upper() if num != 'transformer' else 'Transformer'} / " + (
                "Transformer" if den == "transformer" else den.upper()
            )
            tests.append({"name": name, "family": fam + (num, den), "role": role, "test": t})
    return {"figure": figure, "statement": statement, "rule": rule, "tests": tests}


def judge(claim: dict) -> dict:
    """A claim's verdict and numbers once its tests carry ``p_holm``."""
    parts, said = [], []
    if "shapes" in claim:
        sh = claim["shapes"]["transformer"]
        flat = sh["ci"][1] < (FLAT_EXPONENT if "a" in sh else sh["span"] ** FLAT_EXPONENT)
        parts.append(REPRODUCED if flat else NOT_REPRODUCED)
        said += [
            _shape_said(m.upper() if m != "transformer" else "Transformer", s)
            for m, s in claim["shapes"].items()
        ]
    for t in claim["tests"]:
        test = t["test"] | {"p_holm": t["p_holm"]}
        v, why = decide(test, t["p_holm"])
        if t["role"] == "verdict":
            parts.append(v)
            if t["family"][2:] == ("ffn", "rnn"):
                above = min(r["ci"][0] for r in test["per"].values())
                below = [r for r in test["per"].values() if r["ci"][0] <= 1]
                parts.append(
                    REPRODUCED
                    if not below
                    else INCONCLUSIVE
                    if any(r["censored"] for r in below)
                    else NOT_REPRODUCED
                )
                said.append(f"FFN / RNN interval lower ends >= {above:.2f}")
            said.append(_test_said(t["name"], test) + f": {why}")
        else:
            said.append(f"finding beside the verdict: {_test_said(t['name'], test)}: {why}")
    verdict = (
        NOT_REPRODUCED
        if NOT_REPRODUCED in parts
        else INCONCLUSIVE
        if INCONCLUSIVE in parts
        else REPRODUCED
    )
    return {
        "figure": claim["figure"],
        "statement": claim["statement"],
        "rule": claim["rule"],
        "numbers": "; ".join(said),
        "verdict": verdict,
        "protocol_choice": None,
    }


def with_holm(claim_sets: Sequence[List[dict]]) -> None:
    """Holm-adjust every test of ``claim_sets`` together (a family counted once), in place."""
    tests = [t for cs in claim_sets for c in cs for t in c["tests"]]
    adjusted = analysis.holm([t["test"]["p"] for t in tests], [t["family"] for t in tests])
    for t, p in zip(tests, adjusted, strict=True):
        t["p_holm"] = p


def figure1_verdicts(rows: Sequence[dict], fits: Optional[dict] = None) -> List[dict]:
    """Figure 1's verdicts from one run's rows, Holm over this run's tests (``fits`` unused)."""
    cs = claims(rows, "1")
    with_holm([cs])
    return [judge(c) for c in cs]


def figure3_verdicts(rows: Sequence[dict]) -> List[dict]:
    """Figure 3's verdict from one run's rows, Holm over this run's tests."""
    cs = claims(rows, "3")
    with_holm([cs])
    return [judge(c) for c in cs]


def figure2_verdicts(summary: dict) -> List[dict]:
    """The trained W_Q^T W_K has Lemma 11's block: at least BLOCK_SHARE of its squared mass in
    every seed; under a stated protocol choice when the runs' codes violate Assumption 3."""
    block = list(summary["block_mass"].values())
    mus = list(summary.get("code_mu", {}).values())
    numbers = (
        f"block share {min(block):.4f}-{max(block):.4f} over {len(block)} seeds "
        f"(no structure: {summary['chance_block_mass']:.3f})"
    )
    v = _verdict(
        "2",
        "the trained W_Q^T W_K has Lemma 11's block (query slot against key position)",
        f"the block holds at least {BLOCK_SHARE} of the squared mass in every seed",
        numbers,
        bool(block) and min(block) >= BLOCK_SHARE,
    )
    if v["verdict"] == REPRODUCED and mus and max(mus) > MU_ASSUMED:
        v["verdict"] = UNDER_CHOICE
        v["protocol_choice"] = (
            f"the paper's experimental codes, coherence {min(mus):.2f}-{max(mus):.2f} > 1/2 "
            "(outside Assumption 3)"
        )
    return [v]


def weight_decay_choice(rows: Sequence[dict], paper: float = 0.1) -> Optional[str]:
    """The protocol choice a Figure 1 or 3 run made, if its weight decay is not the paper's."""
    wds = {r.get("config", {}).get("weight_decay", r.get("weight_decay")) for r in rows}
    wds = sorted(w for w in wds if w is not None)
    if wds and wds != [paper]:
        return f"weight decay {', '.join(f'{w:g}' for w in wds)} (the paper's: {paper:g})"
    return None


def with_choice(verdicts: List[dict], choice: Optional[str]) -> List[dict]:
    """The verdicts of runs made under ``choice``: reproduced becomes reproduced under it."""
    if choice is None:
        return verdicts
    out = []
    for v in verdicts:
        v = dict(v, protocol_choice=choice)
        if v["verdict"] == REPRODUCED:
            v["verdict"] = UNDER_CHOICE
        out.append(v)
    return out


def lines(summary: dict) -> List[str]:
    """One printed line per verdict of a summary: figure, statement, verdict, the numbers."""
    out = []
    for v in summary.get("verdicts", []):
        choice = f" ({v['protocol_choice']})" if v["protocol_choice"] else ""
        out.append(
            f"figure {v['figure']}: {v['statement']}: {v['verdict']}{choice}: {v['numbers']}"
        )
    return out
