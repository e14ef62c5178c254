"""The book's pages, one row each: the one place a page is declared.

A :class:`Page` holds the page's id (its notebook is ``notebooks/<id>.ipynb``), its heading, the study's finding it
tests, what it asks, the parameters it takes (the shared ones, the groups it shares with other pages, its own, each
with the tiny preset's value), the tables and sweeps it writes for later pages (:class:`Artifact`) and the models
it loads. Everything else that lists pages is derived from :data:`PAGES`: the table of contents (:func:`toc_yaml`),
each notebook's ``parameters`` cell (:func:`parameters_cell`, literal assignments papermill reads), the build's
order and waits (:func:`page_needs`, :func:`training_needs`), the tiny preset (:func:`tiny_settings`), the timings
steps (:func:`timing_steps`), the scorecard's headings (:func:`headings`) and the page tables of the README and the
book's introduction (:func:`readme_table`, :func:`intro_table`). ``tests/test_pages.py`` checks the files against it,
and adds a toy page to show a new page is one row here, one page module and one notebook
(``docs/anatomy-of-a-page.md``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from headlab.core.stats import N_BOOT

TABLE, SWEEP = "table", "sweep"
CROSS_ENCODER, TWO_TOWER = "fine-tuning", "two-tower fine-tuning"  # the training steps a page can wait on
STUDENTS = "students"  # page 10's distilled students: trained from the cross-encoder, so after it
TRAINING_STEPS = (CROSS_ENCODER, TWO_TOWER, STUDENTS)
PRETRAINING, PRESET_TOTAL = "pretraining", "preset total"  # the timings' first and last steps of a preset
# a training step that starts from another's model waits for it (pretraining: only a preset whose model headlab
# pretrains has that step; elsewhere the wait names no step and is no wait)
TRAINING_WAITS = {STUDENTS: (CROSS_ENCODER,), CROSS_ENCODER: (PRETRAINING,), TWO_TOWER: (PRETRAINING,)}
KEEP = None  # a parameter's tiny value when the tiny preset keeps its default


@dataclass(frozen=True)
class Parameter:
    """One papermill parameter: its name, default, what it means (the comment in the cell), its value in the tiny
    preset (``tiny_value`` is used only when ``tiny`` is true, since None is a value too) and, where the default is
    None, the type of its other values (``hint``)."""

    name: str
    default: object
    note: str
    tiny_value: object = KEEP
    tiny: bool = False
    hint: str = ""

    def __post_init__(self):
        if self.default is None and not self.hint:
            raise ValueError(f"parameter {self.name}: a None default needs a hint, its other values' type (e.g. 'int')")

    def line(self, width: int) -> str:
        """The parameter as a cell's assignment, its note wrapped to comment lines within ``width`` characters."""
        value = f'"{self.default}"' if isinstance(self.default, str) and '"' not in self.default else repr(self.default)
        if self.default is None:  # no annotation papermill parses says "or None"; the note does
            code, note = f"{self.name} = None", f"{self.hint} or None: {self.note}"
        else:
            code, note = f"{self.name}: {type(self.default).__name__} = {value}", self.note
        first, *more = textwrap.wrap(note, width - max(len(code), 22) - 4) or [""]
        lines = [f"{code:<22}  # {first}".rstrip()]
        lines += [f"{'':<22}  # {text}" for text in more]
        return "\n".join(lines)


def tiny(name: str, default: object, note: str, value: object, hint: str = "") -> Parameter:
    """A :class:`Parameter` the tiny preset sets to ``value``."""
    return Parameter(name, default, note, value, tiny=True, hint=hint)


@dataclass(frozen=True)
class Artifact:
    """A table (``<results>/<name>.csv``, or ``<name>-<key>.csv`` for one per setting) or a sweep (the folders
    ``<results>/sweeps/<name>-<plan hash>/``, whose masks later sweeps of the same split reuse) that one page writes
    and later pages read (:attr:`Page.reads`), or the build stacks across presets into ``runs/`` (``for_build``: the
    README's tables); ``page`` is filled in by the registry."""

    name: str
    kind: str
    what: str
    page: str = ""
    for_build: bool = False

    def path(self, folder: Path, key: str | None = None) -> Path:
        """Where the table lies in the results ``folder`` (a sweep has folders instead: :meth:`folders`)."""
        if self.kind != TABLE:
            raise ValueError(f"{self.name!r} is a {self.kind}, not a table: use its folders")
        return Path(folder) / (f"{self.name}.csv" if key is None else f"{self.name}-{key}.csv")

    def folders(self, folder: Path) -> list[Path]:
        """The sweep's folders in the results ``folder`` (one per plan that ran), sorted by name."""
        if self.kind != SWEEP:
            raise ValueError(f"{self.name!r} is a {self.kind}, not a sweep: use its path")
        return sorted((Path(folder) / "sweeps").glob(f"{self.name}-*"))


@dataclass(frozen=True)
class Page:
    """One page of the book: a notebook, the finding it tests and what it shares with the others."""

    id: str  # notebooks/<id>.ipynb
    heading: str  # the scorecard's and the README's name for it
    finding: str  # the study's finding it tests (the introduction's table)
    measures: str  # what it measures (the introduction's table)
    asks: str  # what it asks, on each model (the README's table)
    parameters: tuple[Parameter, ...] = ()  # its own
    groups: tuple[tuple[Parameter, ...], ...] = ()  # parameters it shares with other pages, after SHARED
    produces: tuple[Artifact, ...] = ()
    reads: tuple[str, ...] = ()  # names of artifacts earlier pages produce
    trains: tuple[str, ...] = (CROSS_ENCODER,)  # the models it loads: training steps it waits on
    caption: str = "Findings"

    @property
    def all_parameters(self) -> tuple[Parameter, ...]:
        """Every parameter the page takes, in its cell's order: the shared ones, its groups', then its own."""
        return (*SHARED, *(p for group in self.groups for p in group), *self.parameters)

    def defaults(self) -> dict[str, object]:
        """Each parameter's default, by name."""
        return {p.name: p.default for p in self.all_parameters}


SHARED = (
    Parameter("MODEL", "minilm", 'asset name, "zh-char" (pretrained by headlab), a model folder or a Hugging Face id'),
    Parameter("DATA", "stsb-en", 'asset name ("stsb-en", "stsb-zh") or a query,title,label file'),
    Parameter("SEED", 0, "seeds every draw, split and fine-tune"),
    tiny("DEVICE", "auto", '"cpu", "cuda", "cuda:N" or "auto"', "cpu"),
    tiny("EPOCHS", 3, "fine-tuning epochs (the checkpoint is cached per setting)", 1),
    Parameter("LR", 5e-5, "fine-tuning learning rate"),
    Parameter("FREEZE_WORD_EMBEDDINGS", False, "fine-tuning: keep the word-embedding matrix as pretrained (e5)"),
    tiny("TRAIN_LIMIT", None, "fine-tune on this many training pairs (None: all)", 64, hint="int"),
    Parameter("EVAL_SPLIT", "test", "the split every effect is measured on"),
    tiny("EVAL_LIMIT", None, "evaluate on this many pairs of EVAL_SPLIT (None: all)", 40, hint="int"),
    Parameter("BATCH_SIZE", 64, "pairs per forward pass"),
    Parameter("RUN_DIR", "runs", "where result tables are written (a relative folder lies in the repository)"),
    tiny("N_BOOT", N_BOOT, "bootstrap resamples for every interval", 200),
    Parameter(
        "CLUSTER",
        None,
        'Dask cluster for the sweeps: None, "local:N" or "tcp://host:8786" (headlab[cluster])',
        hint="str",
    ),
)
# 01's random shares of heads: page 10 takes them too, so its random pruning curve is 01's masks (reused, not rerun)
REDUNDANCY = (
    tiny(
        "SHARES",
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "shares of all heads masked",
        [0.0, 0.5, 1.0],
    ),
    tiny("REDUNDANCY_DRAWS", 10, "random head sets per share (enough to decide 'falls steadily')", 2),
)
# 05's choice of term-matching heads: the pages that read its heads (06-09) take these, so they ask for 05's heads
MATCHING_HEADS = (
    Parameter("K_MATCHING", 5, "term-matching heads (the study had 5)"),
    Parameter("RANK_BY", "match_excess", "role score that ranks heads (one of headlab.measures.roles.ROLE_COLUMNS)"),
    Parameter(
        "ROLE_LIMIT",
        None,
        "pairs that score heads, a seeded subset (None: a seeded half of EVAL_SPLIT)",
        hint="int",
    ),
    Parameter("EXCLUDE_STOPWORDS", True, "leave headlab.measures.roles.ENGLISH_STOPWORDS out of the shared terms"),
)
# 05's random sets, whose sweep 08 and 09 read
MATCHING_SETS = (
    tiny("MATCHING_DRAWS", 15, "random head sets per random condition (their spread is in the t interval)", 2),
    tiny("KEEP_DRAWS", 15, "random lower-half head sets kept (the control for keeping the matching heads)", 2),
)
EXPLORE = tiny("N_EXPLORE", 4, "pairs precomputed for the static explorer", 2)
SHOWN = Parameter("MAX_TOKENS", 32, "longest pair considered for the maps")
SHOWN_PAIR = Parameter(
    "EXAMPLE", None, "index of the pair whose maps are shown (None: the longest shared phrase)", hint="int"
)

PAGES = (
    Page(
        "00_setup",
        "00 setup",
        "(setup)",
        "data, grade mapping, fine-tuning, baseline accuracy with intervals",
        "the data, its grades, the fine-tuned model and its baseline accuracy",
        caption="Setup",
    ),
    Page(
        "01_redundancy",
        "01 redundancy",
        "1. attention is redundant: masking <20% of heads costs nothing, 10% gives about +1%",
        "random masking curve, draws and bootstrap intervals",
        "how much accuracy goes as more heads, drawn at random, are masked",
        groups=(REDUNDANCY,),
        produces=(
            Artifact(
                "redundancy",
                SWEEP,
                "the random-share masks; 10's random pruning curve reuses their results",
            ),
        ),
    ),
    Page(
        "02_layer_dependence",
        "02 layer dependence",
        "2. low layers matter more than high ones; masking whole middle layers helps; 7. single heads",
        "low vs high halves, whole layers, the single-head grid (McNemar + Holm), gradient importance",
        "low layers against high ones, whole layers, every single head",
        (
            Parameter("HALF_STEPS", 5, "shares of all heads from 0 to 50% (a whole half) in this many equal steps"),
            tiny("HALF_DRAWS", 3, "random head sets per share and half", 2),
            tiny("DECIDING_DRAWS", 12, "... at 80% of the low heads (40% of all), where collapse is decided", 2),
            Parameter("EXAMPLE", 0, "the test pair whose attention the head explorer shows"),
        ),
        produces=(
            Artifact(
                "layer_dependence",
                SWEEP,
                "every head masked alone, and the halves: 07 and 09 read the single-head masks, 10 reuses the halves",
            ),
        ),
    ),
    Page(
        "03_word_segmentation",
        "03 word segmentation",
        "3. some heads mark word boundaries (70% one head, 96% a union)",
        "the study's rule per head vs majority baselines, an oracle union with a shuffled control, a held-out probe",
        "whether some heads' attention marks where words end",
        (
            Parameter(
                "SEG_CORPUS",
                "eval",
                '"eval" (EVAL_SPLIT, WordPiece word ends), "eval-jieba" (Chinese pairs cut by jieba) or "pku-1998" '
                "(held-out People's Daily sentences, gold words)",
            ),
            Parameter(
                "SEG_ALSO",
                None,
                'a second corpus scored the same way near the end (zh-char: "eval-jieba")',
                hint="str",
            ),
            Parameter(
                "SEG_LIMIT",
                None,
                "examples read (None: all of EVAL_SPLIT, or 500 People's Daily sentences)",
                hint="int",
            ),
            Parameter(
                "UNION_HEADS",
                None,
                "heads in the headlined oracle union (None: the fewest reaching 96%)",
                hint="int",
            ),
            Parameter("MAX_UNION_HEADS", 8, "the union curves go up to this many heads"),
            tiny("UNION_CONTROL_DRAWS", 5, "shuffled-control unions per subset", 2),
            Parameter("TEST_SHARE", 0.3, "share of examples held out to score the chosen head and the probe"),
            Parameter(
                "EXAMPLE",
                None,
                "example shown (None: the short one with most multi-token-word tokens)",
                hint="int",
            ),
            Parameter("MAX_TOKENS", 24, "longest example considered for the pictures"),
            EXPLORE,
        ),
    ),
    Page(
        "04_word_order",
        "04 word order",
        "4. some heads carry word order (7 heads)",
        "shifted-diagonal heads, shuffled titles, order heads vs random heads, the case study and how common it is",
        "whether some heads carry word order, and what shuffling a title's words does",
        (
            Parameter("ORDER_K", 7, "order heads masked (the study: 7)"),
            tiny("ORDER_DRAWS", 15, "random head sets, one head from each order head's layer (the study: 100)", 3),
            Parameter("ORDER_LIMIT", None, "pairs used to rank the heads (None: all of EVAL_SPLIT)", hint="int"),
            Parameter(
                "MIN_GRADE",
                None,
                "a case: gold and predicted grade at least this (None: the scale's 2nd highest)",
                hint="int",
            ),
            Parameter(
                "MIN_DROP",
                None,
                "... whose predicted grade falls by this many when shuffled (None: 2, or fewer)",
                hint="int",
            ),
            Parameter("CASE", None, "pair shown (None: the one most like the study's case)", hint="int"),
            SHOWN,
            tiny("K_MAX", 14, "the explorer's k slider goes from 0 to this", 3),
            tiny("EXPLORE_EXAMPLES", 6, "pairs precomputed for the static explorer", 3),
            tiny("EXPLORE_DRAWS", 10, "random head sets per k in the explorer", 2),
        ),
    ),
    Page(
        "05_term_matching",
        "05 term matching",
        "5. five term-matching heads in low layers matter far more than random heads (−52.4%)",
        "term-matching scores against an identity-blind baseline, the study's mask table with random-head controls",
        "whether a few low heads that match query terms in the title matter more than random heads",
        (SHOWN_PAIR, SHOWN, EXPLORE),
        groups=(MATCHING_HEADS, MATCHING_SETS),
        produces=(
            Artifact(
                "head_roles",
                TABLE,
                "every head's role scores, one table per choice of pairs, seed and stopwords (key)",
            ),
            Artifact(
                "term_matching_heads",
                TABLE,
                "the term-matching heads and the settings that chose them",
            ),
            Artifact(
                "term_matching",
                SWEEP,
                "the term-matching heads masked, and the random sets they are set against",
            ),
        ),
    ),
    Page(
        "06_finetune_delta",
        "06 fine-tuning sharpens term matching",
        "6. fine-tuning sharpens term matching; self and `[SEP]` attention fall",
        "per-head attention before vs after fine-tuning, paired intervals, the three claims",
        "whether fine-tuning sharpens term matching",
        (
            Parameter(
                "DELTA_LIMIT",
                None,
                "pairs of EVAL_SPLIT the changes are measured on (None: all of them)",
                hint="int",
            ),
            tiny(
                "CHOICE_LIMIT",
                500,
                "dev pairs the pretrained model chooses its heads on (None: all of dev)",
                20,
                "int | None",
            ),
            SHOWN_PAIR,
            SHOWN,
            EXPLORE,
        ),
        reads=("head_roles", "term_matching_heads"),
        groups=(MATCHING_HEADS,),
    ),
    Page(
        "07_cls_head",
        "07 the high [CLS] head",
        "7. a high head's `[CLS]` attention reads the shared terms and spreads out when the matching heads go",
        "05's term-matching heads masked one at a time, the most harmful upper head, its `[CLS]` attention on shared "
        "terms against chance, before/after masking",
        "whether a high head's `[CLS]` attention reads the shared terms",
        (
            tiny("CLS_CONTROL_DRAWS", 15, "random lower-half head sets masked instead of the matching heads", 2),
            Parameter("EXAMPLE", None, "index of the pair shown first (None: the longest shared phrase)", hint="int"),
            SHOWN,
            EXPLORE,
        ),
        reads=("layer_dependence", "head_roles", "term_matching_heads"),
        groups=(MATCHING_HEADS,),
    ),
    Page(
        "08_two_tower",
        "08 two towers",
        "(5, the study's explanation) a two-tower BERT did badly because it cannot match the terms of query and title",
        "two towers fine-tuned the same way, where their loss falls (pairs that share terms or not), cross-sentence "
        "attention blocked, and a lexical grader",
        "whether two towers grade worse because they cannot match terms",
        reads=("head_roles", "term_matching_heads", "term_matching"),
        produces=(
            Artifact(
                "two_tower_conditions",
                TABLE,
                "each model's accuracy per condition: the build's runs/two_tower.csv",
                for_build=True,
            ),
        ),
        groups=(MATCHING_HEADS, MATCHING_SETS),
        trains=(CROSS_ENCODER, TWO_TOWER),
    ),
    Page(
        "09_patching",
        "09 activation patching",
        "(5, tested causally) the term-matching heads carry the replaced words, and term matching beyond a word's "
        "identity; the high `[CLS]` head reads them and hands them to the classifier through `[CLS]`",
        "activation patching per head and per position on contrast titles (shared words replaced; TFC1; one shared "
        "against one unshared word on the same pairs), attribution patching audited against it, mean-ablation "
        "specificity within grades, path patching to every head above against random senders, the circuit's "
        "faithfulness (under mean and resample ablation), completeness and minimality",
        "whether the term-matching heads carry the signal, patched in from a contrast pair",
        (
            tiny(
                "PATCH_DRAWS",
                8,
                "random sets patched instead: K_MATCHING lower-half heads, senders of their layers, circuits",
                2,
            ),
            tiny(
                "CONTRAST_DRAWS",
                3,
                "draws of the replacement words; the matching heads and random sets patched on each",
                2,
            ),
            tiny(
                "IDENTITY_DRAWS",
                6,
                "draws of one shared and one unshared word replaced (the power planner's buy: past 6 the pairs limit)",
                2,
            ),
            Parameter("N_SHOWN", 6, "contrast pairs shown"),
        ),
        reads=("layer_dependence", "head_roles", "term_matching_heads"),
        produces=(
            Artifact(
                "patching_attribution_agreement",
                TABLE,
                "attribution patching against activation patching: the build's runs/attribution_agreement.csv",
                for_build=True,
            ),
        ),
        groups=(MATCHING_HEADS,),
    ),
    Page(
        "10_pruning",
        "10 pruning by importance",
        "(1, in practice) for distillation, keep more low-level heads",
        "heads pruned in order of gradient importance beside random draws, the safe share chosen on dev, students of "
        "the same size distilled from the teacher (low, high or important heads kept), the pruned model saved, "
        "reloaded and timed",
        "how many heads can go in order of importance, which heads a distilled student should keep, and how a smaller "
        "model serves",
        (
            Parameter("ORDER_SPLIT", "dev", "the split the importance order is computed on (never EVAL_SPLIT)"),
            tiny("HALF_SHARES", [0.1, 0.2, 0.3, 0.4, 0.5], "shares of all heads removed within one half", [0.2, 0.5]),
            tiny(
                "STUDENT_SHARE",
                0.3,
                "share of all heads each distilled student lacks (within one half, or anywhere)",
                0.2,
            ),
            tiny("STUDENT_SEEDS", 3, "seeds per student kind (their chance is in the intervals)", 1),
            Parameter("STUDENT_EPOCHS", 1, "distillation epochs per student (the same budget for every kind)"),
            tiny("STUDENT_TRAIN_LIMIT", 2000, "training pairs a student is distilled on (None: all)", 64, hint="int"),
            tiny(
                "STUDENT_TEMPERATURES",
                [1.0, 4.0],
                "distillation temperatures tried on ORDER_SPLIT with the important-heads student",
                [2.0],
            ),
        ),
        reads=("redundancy", "layer_dependence"),
        produces=(
            Artifact(
                "pruning_safe_share",
                TABLE,
                "the share pruned within the margin: the build's runs/pruning.csv",
                for_build=True,
            ),
            Artifact(
                "pruning_model",
                TABLE,
                "the pruned model's size and grades: the build's runs/pruning.csv",
                for_build=True,
            ),
        ),
        groups=(REDUNDANCY,),
        trains=(CROSS_ENCODER, STUDENTS),
    ),
)


def page_ids() -> list[str]:
    """Every page's id (its notebook's name), in the book's order."""
    return [p.id for p in PAGES]


def page(page_id: str) -> Page:
    """The registered page ``page_id``; an unregistered one is an error that lists the registry."""
    for p in PAGES:
        if p.id == page_id:
            return p
    raise KeyError(f"no page {page_id!r} in headlab.lab.pages.PAGES ({', '.join(p.id for p in PAGES)})")


def artifacts() -> dict[str, Artifact]:
    """Every table and sweep a page writes for later pages, by name, each with its page."""
    return {a.name: Artifact(a.name, a.kind, a.what, p.id, a.for_build) for p in PAGES for a in p.produces}


def artifact(name: str) -> Artifact:
    """The registered artifact ``name``; an unregistered one is an error that lists the registry."""
    found = artifacts()
    if name not in found:
        raise KeyError(
            f"no shared artifact {name!r} in headlab.lab.pages.PAGES ({', '.join(found)}): "
            "a table or sweep another page reads must be declared in its page's `produces`"
        )
    return found[name]


def page_needs() -> dict[str, tuple[str, ...]]:
    """Each reading page and the pages whose artifacts it reads (sorted): what the build waits for before a page."""
    return {p.id: tuple(sorted({artifact(name).page for name in p.reads})) for p in PAGES if p.reads}


def training_needs(names: list[str]) -> dict[str, tuple[str, ...]]:
    """The training steps the pages ``names`` wait for: ``{step: (the pages that need it)}``, in training order."""
    wanted = [page(n) for n in names]
    steps = {step: tuple(p.id for p in wanted if step in p.trains) for step in TRAINING_STEPS}
    return {step: ids for step, ids in steps.items() if ids}


def tiny_settings() -> dict[str, object]:
    """The tiny preset: every parameter's tiny value (a name several pages take must agree on it)."""
    settings: dict[str, object] = {}
    for p in PAGES:
        for parameter in p.all_parameters:
            if parameter.tiny:
                if settings.get(parameter.name, parameter.tiny_value) != parameter.tiny_value:
                    raise ValueError(f"page {p.id}: tiny {parameter.name} disagrees with another page's")
                settings[parameter.name] = parameter.tiny_value
    return settings


def timing_steps() -> tuple[str, ...]:
    """A preset's steps in the timings ledger, in the order they start: its models trained, its pages, its total."""
    return (PRETRAINING, *TRAINING_STEPS, *(p.id for p in PAGES), PRESET_TOTAL)


def headings() -> dict[str, str]:
    """Each page's heading, by id (the scorecard's sections)."""
    return {p.id: p.heading for p in PAGES}


GENERATED = "# generated from headlab.lab.pages (python -m tools.pages): change the registry, not this cell"


def parameters_cell(page_id: str, width: int = 118) -> str:
    """The notebook's ``parameters`` cell: a literal assignment of every parameter the page takes, with its default
    and meaning, so papermill lists them (``papermill --help-notebook``) and ``-p NAME value`` overrides one."""
    p = page(page_id)
    sections: list[tuple[str, tuple[Parameter, ...]]] = [("every page's parameters", SHARED)]
    sections += [("shared with other pages", group) for group in p.groups]
    sections += [("this page's own", p.parameters)] if p.parameters else []
    blocks = [f"# {title}\n" + "\n".join(q.line(width) for q in group) for title, group in sections]
    return GENERATED + "\n" + "\n\n".join(blocks)


def toc_yaml() -> str:
    """``book/_toc.yml``: each caption's pages, in the registry's order (``executed/ID``, run by the build)."""
    lines = [
        "# generated from headlab.lab.pages (python -m tools.pages): `executed/ID` is notebooks/ID.ipynb, executed",
        "format: jb-book",
        "root: intro",
        "parts:",
    ]
    for caption in dict.fromkeys(p.caption for p in PAGES):
        lines += [f"  - caption: {caption}", "    chapters:"]
        lines += [f"      - file: executed/{p.id}" for p in PAGES if p.caption == caption]
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The README's table of pages (a link to each notebook, what it asks)."""
    rows = [f"| [{p.heading}](notebooks/{p.id}.ipynb) | {p.asks} |" for p in PAGES]
    return "\n".join(["| page | what it asks, on each model |", "|---|---|", *rows])


def intro_table() -> str:
    """The book introduction's table: each page beside the study's finding and what it measures."""
    rows = [f"| {{doc}}`executed/{p.id}` | {p.finding} | {p.measures} |" for p in PAGES]
    return "\n".join(["| page | the study's finding | what we measure |", "|---|---|---|", *rows])
