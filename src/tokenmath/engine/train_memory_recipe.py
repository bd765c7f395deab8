"""How a training run stores its state and its activations, beyond Megatron's bf16 defaults (bytes per value).

MemoryRecipe collects the published savings (and costs) that engine/train_memory.py applies:

  act        "bf16"          every stored activation in bf16 (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 4)
             "fp8"           Transformer Engine with FP8 weight gradients (its default recipe, fp8_wgrad): a linear
                             layer keeps the FP8 cast of its input for the wgrad GEMM instead of the bf16 input
                             (transformer_engine/pytorch/module/linear.py, TE 1.x: saved_inputmat = the FP8 input
                             when "fp8 and not override_linear_precision.wgrad"). Stored at 1 B: the inputs of the
                             QKV (or MLA down-) projection, of the FFN's first GEMM (and each dispatched expert copy)
                             and of its second GEMM. The out-projection's input stays bf16: the attention kernel
                             keeps its output O for its own backward.
             "deepseek-v3"   DeepSeek-V3's (arXiv 2412.19437): Sec. 3.2.3 "recomputing all RMSNorm operations and
                             recomputing all MLA up-projections during back-propagation" (the norms' outputs and the
                             up-projected Q, K, V are not stored); Sec. 3.3.3 "cache activations in FP8 format for the
                             backward pass of the Linear operator", the input of the Linear after attention in
                             "customized E5M6" (12 bits = 1.5 B), "we cache the inputs of the SwiGLU operator and
                             recompute its output in the backward pass ... also stored in FP8" (MoE layers), and
                             Sec. 3.3.2 "we quantize the activation before MoE up-projections into FP8 and then
                             apply dispatch" (each dispatched copy 1 B).
  adam_bytes 12              fp32 master weight + fp32 moments (ZeRO, Rajbhandari et al. 2020, Sec. 3.1);
             8               BF16 moments (DeepSeek-V3 Sec. 3.3.3: "BF16 data format instead of FP32 to track the
                             first and second moments ... the master weights (stored by the optimizer) and gradients
                             (used for batch size accumulation) are still retained in FP32"): 4 + 2 + 2
  dualpipe   False / True    DeepSeek-V3's DualPipe (Sec. 3.2.1: "only increasing the peak activation memory by 1/PP
                             times ... DualPipe requires keeping two copies of the model parameters"): rank
                             i holds stage i and stage PP-1-i, so the first and the last stage's weights and gradients
                             share one chip; their optimizer states are sharded over twice the data-parallel ranks
                             (each stage lives on 2 dp ranks per replica; derived, the report gives no formula), and
                             PP + 1 micro-batches of a stage's layers are in flight instead of 1F1B's PP.
"""
from __future__ import annotations

from dataclasses import dataclass

ACT_STORAGE = ("bf16", "fp8", "deepseek-v3")
ADAM_STATE_BYTES = 12.0       # fp32 master weight + first and second moments (ZeRO Sec. 3.1)
E5M6_BYTES = 1.5              # 1 sign + 5 exponent + 6 mantissa bits (DeepSeek-V3 Sec. 3.3.3)


@dataclass(frozen=True)
class MemoryRecipe:
    """Storage choices of a run (see the module docstring). Bytes per value / per parameter."""
    act: str = "bf16"
    adam_bytes: float = ADAM_STATE_BYTES
    dualpipe: bool = False

    def to_dict(self) -> dict:
        return {"act": self.act, "adam_bytes": self.adam_bytes, "dualpipe": self.dualpipe}


DEFAULT_RECIPE = MemoryRecipe()


def linear_input_bytes(act: str) -> float:
    """Bytes per stored value of a GEMM input that only the GEMM's backward reads."""
    return 2.0 if act == "bf16" else 1.0
