"""adapter.py - the ONE place that reads compare's advice: `ampdiag compare --format json`
(docs/compare-json.md, format_version 1) -> the options of the re-run that follows it.

When the JSON of the advice changes, this function, and only it, changes with it. The harness
(harness.py) re-runs the configuration with exactly what this returns, and judges the run, never
the advice's words.

What it reads, and why (docs/compare-json.md, "recommendation"):
  recommendation.precision.verdict   "undecided" -> no re-run: compare declined (the runs cannot
                                     be compared, the validation set cannot judge, or the FP32
                                     baseline does not learn) and says "run tune"; the harness
                                     counts it apart, even when remedies are named with it (it
                                     records them). Else the precision of the re-run ("fp32",
                                     "fp16", "bf16": bf16 keeps FP32 master weights), predicted
                                     or observed alike: it is the verdict.
  recommendation.precision.master_weights  false with the verdict "bf16": the bf16-pure run
                                     given is kept as run (weights in BF16) -> "bf16-pure".
  recommendation.precision.fp32_layers  -> --fp32-layers (also named in remedies)
  recommendation.remedies[]          each {option, value}: set on the re-run, for both scopes
                                     ("every-run" and "recommended": the re-run is the
                                     recommended run). "--standardize on" (inputs far from unit
                                     scale) is one: the data named as a cause is part of the
                                     advice, the first remedy where it is given.
  recommendation.decisions[]         a decision carrying a run option (`option`, `option_value`)
                                     that remedies did not name is set too (remedies are those
                                     decisions today; this keeps the two from drifting apart),
                                     except what=clip and what=warmup: a clip value and a longer
                                     warm-up are hypotheses compare calls untested (tune tests
                                     them), not its single-shot advice.
  recommendation.lr                  verdict "lower", "raise" or "pick" with a suggested lr ->
                                     --lr suggested (a heuristic never changes `suggested`:
                                     docs/compare-json.md); "keep", "keep-use-master-weights",
                                     "unknown" -> the lr as given.
  recommendation.clip                not applied (above).
Every other option of the configuration stays as the user gave it. An option the advice
names that `ampdiag run` does not offer makes the advice unappliable: the harness records it
and counts the configuration as not fixed.
"""

NOT_APPLIED = ("clip", "warmup")


def run_options_from_compare(report, options, run_offers):
    """report: compare's JSON (a dict); options: the configuration's `ampdiag run` options as
    [[OPTION, VALUE or None], ...]; run_offers: the set of options `ampdiag run --help` lists.
    Returns {"decided": bool, "why": str, "options": [[OPTION, VALUE], ...] or None,
    "changes": [str, ...], "unappliable": [OPTION, ...]}."""
    rec = report["recommendation"]
    prec = rec["precision"]
    verdict = prec["verdict"]
    if verdict == "undecided":
        why = (prec.get("reasons") or [prec.get("text") or "undecided"])[0]
        return {"decided": False, "why": why, "options": None, "changes": [], "unappliable": []}
    out = [list(o) for o in options]
    changes, unappliable = [], []
    named = set()

    def put(opt, val):
        named.add(opt)
        if opt not in run_offers:
            unappliable.append(opt)
            return
        for o in out:
            if o[0] == opt:
                if o[1] != val:
                    changes.append("%s %s -> %s" % (opt, o[1], val))
                o[1] = val
                return
        out.append([opt, val])
        changes.append("%s %s" % (opt, val) if val is not None else opt)

    if verdict == "bf16" and prec.get("master_weights") is False:
        verdict = "bf16-pure"
    put("--precision", verdict)
    if prec.get("fp32_layers"):
        put("--fp32-layers", ",".join(prec["fp32_layers"]))
    for m in rec.get("remedies") or []:
        put(m["option"], m["value"])
    for d in rec.get("decisions") or []:
        if d.get("option") and d["option"] not in named and d.get("what") not in NOT_APPLIED:
            put(d["option"], d.get("option_value"))
    lr = rec.get("lr") or {}
    if lr.get("verdict") in ("lower", "raise", "pick") and lr.get("suggested") is not None:
        put("--lr", "%.6g" % lr["suggested"])
    return {"decided": True, "why": prec.get("text") or verdict, "options": out, "changes": changes,
            "unappliable": unappliable}
