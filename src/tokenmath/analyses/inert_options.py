"""Options a question's layout gives nothing to act on, named in its answer rather than dropped: attention and
expert placement act inside a tensor-parallel group (none when tp = 1), the expert-parallel options on the EP
all-to-all (none when ep = 1, nor in a dense model). Used by analyses/ask.py for every serving question."""
from __future__ import annotations

from tokenmath.specs.question.deployment import Deployment


def no_tp_group(dep: Deployment, tp) -> list[str]:
    """Attention sharding acts inside a tensor-parallel group: with tp = 1 there is none, and the answer says so."""
    out = []
    if dep.attention_sharding in ("batch", "dp") and int(tp) == 1:
        out.append(f"--attention-sharding {dep.attention_sharding} changes nothing here: it shards attention inside a "
                   "tensor-parallel group, and this layout has tp = 1")
    if dep.moe_sharding == "ep" and int(tp) == 1:
        out.append("--moe-sharding ep changes nothing here: it places the experts inside a tensor-parallel group, "
                   "and this layout has tp = 1")
    return out


def no_ep_group(dep: Deployment, ep=None, where: str = "this layout has ep = 1") -> list[str]:
    """The expert-parallel options (--ep-comm, --overlap-ep, --ep-imbalance, --adp-balance) act on the EP all-to-all: a
    layout with ep = 1 has none, nor has any layout of a dense model (ep None: a search's layouts), and the answer
    says so (before, the same answer as without them: silently ignored, found by benchmarks/fuzz_cli.py)."""
    from tokenmath.specs.question.deployment import TRANSPORT_FIELDS, field
    # --adp-balance too: it balances the attention groups an EP all-to-all couples (step_cost: ep > 1)
    given = [field(n).option for n in TRANSPORT_FIELDS + ("adp_balance",) if getattr(dep, n) != field(n).default]
    if dep.moe_sharding != "tp":            # acts inside a TP group, whatever ep: only a dense model ignores it
        from tokenmath.specs.model_catalog import get_model
        if not (get_model(dep.model) if isinstance(dep.model, str) else dep.model).is_moe:
            given.append(field("moe_sharding").option)
    if not given:
        return []
    if ep is not None:
        if int(ep) > 1:
            return []
    else:
        from tokenmath.specs.model_catalog import get_model
        m = get_model(dep.model) if isinstance(dep.model, str) else dep.model
        if m.is_moe:
            return []
        where = f"{m.name} is a dense model"
    return [f"{', '.join(given)} {'changes' if len(given) == 1 else 'change'} nothing here: "
            f"{'it acts' if len(given) == 1 else 'they act'} on a MoE's experts and their all-to-all, and {where}"]
