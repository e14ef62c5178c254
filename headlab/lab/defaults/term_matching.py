"""Page 05's choice of term-matching heads and its random sets: the pages that read its heads (06-09) or its sweep
(08, 09) import these, so they always ask for the heads and masks 05 made."""

K_MATCHING = 5  # term-matching heads (the study had 5)
RANK_BY = "match_excess"  # role score that ranks heads (a column of headlab.findings.roles.ROLE_COLUMNS)
ROLE_LIMIT = None  # pairs used to score heads, a seeded subset (None: a seeded half of EVAL_SPLIT); the masks
# are measured on the other pairs
EXCLUDE_STOPWORDS = True  # leave headlab.findings.roles.ENGLISH_STOPWORDS out of the shared terms
DRAWS = 20  # random head sets per random condition (their spread is in the comparisons' t interval: see
# headlab.core.stats.versus_random; fewer draws mean fewer degrees of freedom and wider verdict intervals)
KEEP_DRAWS = 20  # random lower-half head sets kept (the control for keeping the matching heads)

__all__ = ["K_MATCHING", "RANK_BY", "ROLE_LIMIT", "EXCLUDE_STOPWORDS", "DRAWS", "KEEP_DRAWS"]
