"""/api/sensitivity: `tokenmath sensitivity` on the web API: which hardware figure or efficiency moves an answer most
(analyses.serving.sensitivity.sensitivity, its to_dict() and --explain text; the page draws it as a tornado). No
physics here."""
from __future__ import annotations

from dataclasses import replace
from functools import partial

from tokenmath.faces.web.blank_chips import with_fewest_chips
from tokenmath.faces.web.endpoints import Endpoint, ModelLookup
from tokenmath.faces.web.overrides import SET, chip, what_if
from tokenmath.faces.web.params import Param
from tokenmath.faces.web.serving_fields import (BATCH, HARDWARE, INPUT_LEN, LAYOUT, MODEL, OUTPUT_LEN, dtype_params,
                                                engine_param, layout)


def sensitivity_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.sensitivity import METRICS, sensitivity
    from tokenmath.faces.explain_sensitivity import explain_sensitivity
    m = model(a["model"])
    a = with_fewest_chips(m, a, a["input_len"] + a["output_len"], a["batch"])
    r = sensitivity(m, chip(a), metric=a["metric"], delta=a["delta"], batch=a["batch"],
                    engine=a["engine"], **layout(a), input_len=a["input_len"], output_len=a["output_len"],
                    weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
    d = r.to_dict()
    d.update(what_if(a))
    d["metric_label"] = METRICS[r.metric]
    d["explain"] = explain_sensitivity(r)
    return d


def metric_labels() -> dict[str, str]:
    """The answers a sensitivity may rank, id -> label (the page's choices)."""
    from tokenmath.analyses.serving.sensitivity import METRICS
    return dict(METRICS)


def sensitivity_table(model: ModelLookup) -> dict[str, Endpoint]:
    from tokenmath.analyses.serving.sensitivity import METRICS
    return {"sensitivity": Endpoint(
        (MODEL, HARDWARE, *LAYOUT,
         # the sensitivity question's own default, as `tokenmath sensitivity --batch`'s
         replace(BATCH, default="max", help="concurrent sequences, or 'max' (the default: the largest that fits, "
                 "re-solved at each point so HBM capacity shows its effect)"),
         INPUT_LEN, OUTPUT_LEN,
         Param("metric", "choice", "cost_per_mtok_output_usd", "the answer whose sensitivity is ranked",
               choices=tuple(METRICS)),
         Param("delta", "float", 0.2, "each input moved down and up by this fraction", 0.01, 0.9),
         *dtype_params(), engine_param(), SET),
        partial(sensitivity_response, model), "tokenmath.analyses.serving.sensitivity.sensitivity")}
