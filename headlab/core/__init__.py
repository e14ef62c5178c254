"""Masking, batching, prediction, the sweep engine, attention maps and statistics: no model files, no data files.

from headlab.core import head_grid, run_sweep, single_head_specs
"""

from headlab.core.exports import exports as _exports

_PUBLIC = {
    "AttentionCache": "headlab.core.attention",
    "attention_maps": "headlab.core.attention",
    "cls_attention_rows": "headlab.core.attention",
    "token_roles": "headlab.core.attention",
    "confusion": "headlab.core.evaluate",
    "encode": "headlab.core.evaluate",
    "predict": "headlab.core.evaluate",
    "predicted_grades": "headlab.core.evaluate",
    "gradient_importance": "headlab.core.gradients",
    "head_grid": "headlab.core.masking",
    "head_means": "headlab.core.masking",
    "mask_heads": "headlab.core.masking",
    "MaskSpec": "headlab.core.sweep",
    "baseline_correct": "headlab.core.sweep",
    "baseline_spec": "headlab.core.sweep",
    "layer_specs": "headlab.core.sweep",
    "plan_table": "headlab.core.sweep",
    "random_share_specs": "headlab.core.sweep",
    "run_sweep": "headlab.core.sweep",
    "share_curve": "headlab.core.sweep",
    "single_head_specs": "headlab.core.sweep",
    "summarize": "headlab.core.sweep",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
