"""The numbers several pages measure, each in its own module: the head halves and the study's layer map, head
grids, the held-out choice of examples, head roles and the term-matching heads, word segmentation, word order,
contrast pairs, the lexical grader, attention maps compared, the circuit and its faithfulness. A page imports these,
never another page.

    from headlab.measures import matching_heads, role_scores, showcase_examples
"""

from headlab.measures.attention_compare import compare_maps, identical_takeaway
from headlab.measures.grids import focus_head, selection_grid, single_head_correct
from headlab.measures.halves import half_split
from headlab.measures.held_out import (
    choice_limit,
    measured_examples,
    on_examples,
    role_indices,
    selection_note,
    split_halves,
)
from headlab.measures.matching import head_roles, matching_heads, random_lower_sets, term_matching_specs
from headlab.measures.order import order_heads
from headlab.measures.roles import (
    ENGLISH_STOPWORDS,
    cls_profile,
    first_showcase,
    pair_role_scores,
    role_scores,
    showcase_examples,
)

__all__ = [
    "ENGLISH_STOPWORDS",
    "choice_limit",
    "cls_profile",
    "compare_maps",
    "first_showcase",
    "focus_head",
    "half_split",
    "head_roles",
    "identical_takeaway",
    "matching_heads",
    "measured_examples",
    "on_examples",
    "order_heads",
    "pair_role_scores",
    "random_lower_sets",
    "role_indices",
    "role_scores",
    "selection_grid",
    "selection_note",
    "showcase_examples",
    "single_head_correct",
    "split_halves",
    "term_matching_specs",
]
