"""Masking, batching, prediction, the sweep engine, attention maps and statistics: no model files, no data files.

from headlab.core import head_grid, run_sweep, single_head_specs
"""

from headlab.core.attention import AttentionCache, attention_maps, cls_attention_rows
from headlab.core.evaluate import confusion, encode, predict
from headlab.core.grades import GradeScale
from headlab.core.gradients import gradient_importance
from headlab.core.masking import Ablation, head_grid, head_means, mask_heads
from headlab.core.sweep import (
    MaskSpec,
    baseline_correct,
    baseline_spec,
    layer_specs,
    plan_table,
    random_share_specs,
    run_sweep,
    share_curve,
    single_head_specs,
    summarize,
)

__all__ = [
    "Ablation",
    "AttentionCache",
    "GradeScale",
    "MaskSpec",
    "attention_maps",
    "baseline_correct",
    "baseline_spec",
    "cls_attention_rows",
    "confusion",
    "encode",
    "gradient_importance",
    "head_grid",
    "head_means",
    "layer_specs",
    "mask_heads",
    "plan_table",
    "predict",
    "random_share_specs",
    "run_sweep",
    "share_curve",
    "single_head_specs",
    "summarize",
]
